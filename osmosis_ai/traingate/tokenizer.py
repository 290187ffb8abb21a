"""Tokenizers that turn messages into token ids when the policy backend returns none.

A real trainer tokenizes with the policy's own chat template. Locally we only need ids that are
deterministic and consistent between turns, so TITO bookkeeping (prompt ids, completion ids,
append-only prefixes) can be exercised end to end. Two implementations:

* :class:`ByteTokenizer` (default): the UTF-8 bytes of a fixed text rendering of the messages
  (:mod:`osmosis_ai.models.rendering`) — no dependencies, 256-symbol vocabulary.
* :class:`HFTokenizer`: a HuggingFace ``tokenizer.json`` loaded with the ``tokenizers`` package,
  applied to the same rendering (no chat template, so ids approximate the model's, not equal them).

:class:`ChatTokenizer` is the exact one: a model directory's ``tokenizer.json`` *and* its chat
template, so prompts are the model's own (see :mod:`osmosis_ai.traingate.tito` for how the gateway
keeps them token-in-token-out).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from osmosis_ai.traingate.chat_template import ChatTemplate
from osmosis_ai.traingate.errors import TrainGateError

Message = dict[str, Any]


class Tokenizer(Protocol):
    """Anything that can encode a rendered prompt or completion into token ids."""

    name: str

    def encode(self, text: str) -> list[int]: ...


class ByteTokenizer:
    """UTF-8 bytes as token ids: exact, reversible and free."""

    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))


def _load_hf(file: Path) -> Any:
    try:
        from tokenizers import Tokenizer as _HFTokenizer
    except ImportError as exc:  # pragma: no cover - tokenizers ships with litellm
        raise TrainGateError(
            "a tokenizer.json needs the 'tokenizers' package; install it with: pip install tokenizers"
        ) from exc
    if not file.is_file():
        raise TrainGateError(
            f"tokenizer file not found: {file} (give a HuggingFace model directory or its tokenizer.json)"
        )
    try:
        return _HFTokenizer.from_file(str(file))
    except Exception as exc:
        raise TrainGateError(f"cannot load tokenizer {file}: {exc}") from exc


class HFTokenizer:
    """A HuggingFace fast tokenizer loaded from a ``tokenizer.json`` file."""

    def __init__(self, path: str | Path) -> None:
        file = Path(path)
        self._tokenizer = _load_hf(file)
        self.name = str(file)

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)


class ChatTokenizer:
    """A model's ``tokenizer.json`` with its chat template: the ids a trainer of that model trains on.

    Text is encoded as ``apply_chat_template`` encodes a rendered chat: special tokens written in the
    text are matched, none are added around it.
    """

    def __init__(self, tokenizer_file: str | Path, template: ChatTemplate) -> None:
        file = Path(tokenizer_file)
        self._tokenizer = _load_hf(file)
        self.template = template
        self.name = str(file.parent)
        self.eos_token: str | None = template.variables.get("eos_token")
        added = self._tokenizer.get_added_tokens_decoder()
        self.special_ids = frozenset(index for index, token in added.items() if token.special)
        self.added_texts = tuple(str(token.content) for token in added.values() if token.content)

    @classmethod
    def from_directory(
        cls, directory: str | Path, *, chat_template: str | Path | None = None
    ) -> ChatTokenizer:
        """Load ``DIR/tokenizer.json`` and the directory's template (``chat_template`` overrides it)."""
        folder = Path(directory)
        file = folder / "tokenizer.json"
        if not file.is_file():
            raise TrainGateError(f"no tokenizer.json in {folder} (give a local HuggingFace model directory)")
        return cls(file, ChatTemplate.from_directory(folder, override=chat_template))

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def token_start(self, text: str, offset: int) -> int:
        """``offset``, moved back to the start of an added token of ``text`` that straddles it."""
        for token in self.added_texts:
            start = text.rfind(token, max(0, offset - len(token) + 1), offset + len(token) - 1)
            if 0 <= start < offset < start + len(token):
                return start
        return offset

    def decode(self, ids: list[int]) -> str:
        return str(self._tokenizer.decode(ids, skip_special_tokens=False))

    def render(
        self,
        messages: list[Message],
        *,
        tools: list[Message] | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        return self.template.render(messages, tools=tools, add_generation_prompt=add_generation_prompt)


def load_tokenizer(spec: str | None, *, chat_template: str | None = None) -> Tokenizer:
    """The tokenizer of ``--tokenizer``/``--chat-template``.

    ``None``/``"bytes"`` -> :class:`ByteTokenizer`; a directory -> :class:`ChatTokenizer` with its
    template; a ``tokenizer.json`` -> :class:`HFTokenizer`, or a :class:`ChatTokenizer` when a template
    file is given too (special tokens then come from the ``tokenizer_config.json`` beside it).
    """
    if spec is None or spec == "bytes":
        if chat_template is not None:
            raise TrainGateError(
                "--chat-template needs --tokenizer DIR (the model directory whose tokenizer.json encodes it)"
            )
        return ByteTokenizer()
    path = Path(spec)
    if path.is_dir():
        return ChatTokenizer.from_directory(path, chat_template=chat_template)
    if chat_template is not None:
        return ChatTokenizer(path, ChatTemplate.from_directory(path.parent, override=chat_template))
    return HFTokenizer(path)
