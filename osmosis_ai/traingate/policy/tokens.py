"""Policies that generate from token ids: a trainer's own model behind the gateway.

A :class:`TokenPolicy` is given the prompt ids the gateway's token trace holds for the turn (the
first prompt rendered by the chat template, then each completion and the messages appended since),
so the ids a trainer trains on are exactly the ids the model generated from. It returns the
generated ids and the assistant message they decode to; :func:`parse_tool_calls` turns the
Hermes/Qwen ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks of the text into the
message's ``tool_calls``. The gateway renders and encodes, never decodes.
"""

from __future__ import annotations

import abc
import json
import re
from typing import Any, overload

from osmosis_ai.traingate.policy.base import Generation, Message, Policy

__all__ = ["TokenPolicy", "assistant_message", "generation_of", "parse_tool_calls", "turn_limit"]

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The text without its well-formed ``<tool_call>`` blocks, and those blocks as OpenAI tool calls.

    A block whose body is not a JSON object with a string ``name`` stays in the text: the model wrote
    something that is not a call, and the agent sees it as it was written.
    """
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    cursor = 0
    for match in _TOOL_CALL.finditer(text):
        try:
            body = json.loads(match.group(1))
        except ValueError:
            continue
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            continue
        arguments = body.get("arguments", {})
        kept.append(text[cursor : match.start()])
        cursor = match.end()
        calls.append(
            {
                "id": f"call_{len(calls)}",
                "type": "function",
                "function": {
                    "name": body["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    kept.append(text[cursor:])
    return "".join(kept).strip(), calls


def assistant_message(text: str) -> Message:
    """The assistant message of a generated text: its content and the tool calls it holds."""
    content, calls = parse_tool_calls(text)
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


def generation_of(tokenizer: Any, ids: list[int], logprobs: list[float] | None = None) -> Generation:
    """The :class:`Generation` of the ids a model generated: the assistant message of their text
    (``tokenizer.decode``, special tokens left out), ``stop`` when they end with the tokenizer's end of
    turn, and ``logprobs`` when there is one per id."""
    return Generation(
        assistant_message(tokenizer.decode(ids, skip_special_tokens=True)),
        finish_reason="stop" if ids and ids[-1] == tokenizer.eos_token_id else "length",
        token_ids=ids,
        logprobs=logprobs if logprobs is not None and len(logprobs) == len(ids) else None,
    )


@overload
def turn_limit(limit: int, params: dict[str, Any]) -> int: ...
@overload
def turn_limit(limit: int | None, params: dict[str, Any]) -> int | None: ...
def turn_limit(limit: int | None, params: dict[str, Any]) -> int | None:
    """A turn's new-token budget: ``limit`` lowered by the chat call's ``max_tokens`` (a positive
    whole number), which stands alone when there is no ``limit``."""
    asked = params.get("max_tokens")
    if not isinstance(asked, int) or isinstance(asked, bool) or asked <= 0:
        return limit
    return asked if limit is None else min(limit, asked)


class TokenPolicy(Policy):
    """A policy answering from the token trace's prompt ids (see the module docstring).

    The gateway needs the model's chat template (a :class:`~osmosis_ai.traingate.tokenizer.ChatTokenizer`)
    to serve one: without it there are no prompt ids to generate from, and every chat call fails.
    """

    @abc.abstractmethod
    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        """Generate after ``prompt_ids``: a :class:`Generation` with ``token_ids`` (the generated ids,
        end-of-turn included when the model wrote it) and ``message`` (see :func:`assistant_message`)."""

    async def generate(
        self, messages: list[Message], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        from osmosis_ai.traingate.errors import PolicyError

        raise PolicyError(
            f"policy {self.name!r} generates from token ids: give the gateway the model's tokenizer "
            "and chat template (a ChatTokenizer)",
            retryable=False,
        )
