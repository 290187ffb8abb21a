"""Tokenizers that turn messages into token ids when the policy backend returns none.

A real trainer tokenizes with the policy's own chat template. Locally we only need ids that are
deterministic and consistent between turns, so TITO bookkeeping (prompt ids, completion ids,
append-only prefixes) can be exercised end to end. Two implementations:

* :class:`ByteTokenizer` (default): the UTF-8 bytes of a fixed text rendering of the messages —
  no dependencies, 256-symbol vocabulary.
* :class:`HFTokenizer`: a HuggingFace ``tokenizer.json`` loaded with the ``tokenizers`` package,
  applied to the same rendering (no chat template, so ids approximate the model's, not equal them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from osmosis_ai.traingate.errors import TrainGateError

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


class Tokenizer(Protocol):
    """Anything that can encode a rendered prompt or completion into token ids."""

    name: str

    def encode(self, text: str) -> list[int]: ...


class ByteTokenizer:
    """UTF-8 bytes as token ids: exact, reversible and free."""

    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))


class HFTokenizer:
    """A HuggingFace fast tokenizer loaded from a ``tokenizer.json`` file."""

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer as _HFTokenizer
        except ImportError as exc:  # pragma: no cover - tokenizers ships with litellm
            raise TrainGateError(
                "a tokenizer.json needs the 'tokenizers' package; install it with: pip install tokenizers"
            ) from exc
        file = Path(path)
        if not file.is_file():
            raise TrainGateError(
                f"tokenizer file not found: {file} (give the path of a HuggingFace tokenizer.json)"
            )
        try:
            self._tokenizer = _HFTokenizer.from_file(str(file))
        except Exception as exc:
            raise TrainGateError(f"cannot load tokenizer {file}: {exc}") from exc
        self.name = str(file)

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)


def load_tokenizer(spec: str | None) -> Tokenizer:
    """``None``/``"bytes"`` -> :class:`ByteTokenizer`; anything else is a ``tokenizer.json`` path."""
    if spec is None or spec == "bytes":
        return ByteTokenizer()
    return HFTokenizer(spec)
