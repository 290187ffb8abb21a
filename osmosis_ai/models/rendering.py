"""A fixed text rendering of chat messages, for token ids and counts where no model tokenizes them:
the TrainGate's default byte tokenizer encodes it (:mod:`osmosis_ai.traingate.tokenizer`), and the
``scripted`` model (:mod:`osmosis_ai.models.scripted`) reports its usage as its UTF-8 bytes, so an
in-process run counts the tokens a ``rollout run`` counts for the same conversation."""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]


def render_message(message: Message) -> str:
    """A deterministic text rendering of one message: role header, content, tool calls as JSON."""
    role = str(message.get("role", ""))
    content = message.get("content")
    text = (
        content
        if isinstance(content, str)
        else ""
        if content is None
        else json.dumps(content, sort_keys=True)
    )
    parts = [f"<|{role}|>\n{text}"]
    if message.get("tool_calls"):
        parts.append(json.dumps(message["tool_calls"], sort_keys=True, separators=(",", ":")))
    if message.get("tool_call_id"):
        parts.append(f"[tool_call_id={message['tool_call_id']}]")
    return "\n".join(parts) + "\n"


def render_prompt(messages: list[Message]) -> str:
    """The rendering of a whole prompt, ending with the header the assistant's answer follows."""
    return "".join(render_message(m) for m in messages) + "<|assistant|>\n"


def render_completion(message: Message) -> str:
    """The rendering of a generated assistant message (without its role header)."""
    return render_message(message).split("\n", 1)[1]


def byte_usage(messages: list[Message], message: Message) -> dict[str, int]:
    """The usage of answering ``messages`` with ``message``, counted in UTF-8 bytes of the rendering."""
    prompt = len(render_prompt(messages).encode("utf-8"))
    completion = len(render_completion(message).encode("utf-8"))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
