"""Template drift: where the token sequence a trainer keeps stops matching a fresh render of the conversation.

A token-in-token-out trainer trains on the ids the model saw and generated, turn after turn. Before
the next turn the model is fed a prompt rendered from the *messages*; if the chat template renders
the history differently from how it was generated (a stripped ``<think>`` block, a swallowed
newline, re-serialised tool-call arguments, another closing token) the two sequences part, and the
training sample no longer matches what the model saw. This module finds the first differing token,
shows both sides and names the cause where one of the known ones fits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Message = dict[str, Any]
Decode = Callable[[list[int]], str]

# kind: what was compared with what.
TEMPLATE = "template"  # the kept sequence vs a fresh render of the conversation
BACKEND_PROMPT = "backend_prompt"  # the backend's prompt ids vs our render of the same messages
BACKEND_COMPLETION = "backend_completion"  # the generated ids vs our render of the parsed message

# cause: why, where a known failure mode fits.
REASONING_REMOVED = "reasoning_removed"
TOOL_CALL_RERENDERED = "tool_call_rerendered"
WHITESPACE_AT_BOUNDARY = "whitespace_at_boundary"
SPECIAL_TOKEN_DIFFERS = "special_token_differs"

CAUSE_TEXT = {
    REASONING_REMOVED: "reasoning removed from history",
    TOOL_CALL_RERENDERED: "tool call re-rendered",
    WHITESPACE_AT_BOUNDARY: "whitespace at a message boundary",
    SPECIAL_TOKEN_DIFFERS: "special token differs",
    None: "unclassified",
}
KIND_TEXT = {
    TEMPLATE: "the trajectory vs a fresh render",
    BACKEND_PROMPT: "the backend's prompt ids vs the template's",
    BACKEND_COMPLETION: "the generated ids vs the template's render of the parsed message",
}
SNIPPET_TOKENS = 12  # tokens decoded on each side of the first difference
WINDOW_TOKENS = 96  # tokens decoded for classification
REASONING_MARKERS = ("<think>", "</think>", "<|channel|>analysis")


@dataclass(frozen=True)
class DriftEvent:
    """The first difference between two token sequences of one rollout turn.

    ``trajectory`` and ``rendered`` are the decoded text around ``position`` on each side (the kept
    or generated sequence, and the template's render); ``template_line`` is the 1-based line of the
    chat template that most likely emits the difference, when one can be found.
    """

    turn: int
    message: int
    position: int
    kind: str
    cause: str | None
    trajectory: str
    rendered: str
    template_line: int | None = None
    template_text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def headline(self) -> str:
        """Where and why, without the texts."""
        where = f"turn {self.turn}, message {self.message}, token {self.position}"
        return f"{where}: {CAUSE_TEXT.get(self.cause, self.cause)} ({KIND_TEXT.get(self.kind, self.kind)})"

    def describe(self) -> str:
        return f"{self.headline()}: trajectory {self.trajectory!r} vs rendered {self.rendered!r}"


def first_difference(left: Sequence[int], right: Sequence[int]) -> int | None:
    """Index of the first differing token (the shorter length if one extends the other); ``None`` if equal."""
    if len(left) == len(right) and list(left) == list(right):  # the common case, compared in C
        return None
    for index, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return index
    return None if len(left) == len(right) else min(len(left), len(right))


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    index = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        index += 1
    return index


def _arguments_texts(messages: Iterable[Message]) -> list[str]:
    """Every tool call's arguments as sent, and as compact and spaced JSON (the forms templates write)."""
    texts: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            raw = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
            if raw is None:
                continue
            value = raw
            if isinstance(raw, str):
                texts.append(raw)
                try:
                    value = json.loads(raw)
                except ValueError:
                    continue
            texts.append(json.dumps(value))
            texts.append(json.dumps(value, separators=(",", ":")))
    return [t for t in texts if len(t) > 2]


def _reasoning_texts(messages: Iterable[Message]) -> list[str]:
    texts = []
    for message in messages:
        for key in ("reasoning_content", "thinking", "reasoning"):
            value = message.get(key)
            if isinstance(value, str) and value.strip():
                texts.append(value.strip()[:40])
    return texts


def classify(
    kept: Sequence[int],
    rendered: Sequence[int],
    position: int,
    *,
    decode: Decode,
    special_ids: Collection[int],
    messages: Sequence[Message],
) -> str | None:
    """Name the cause of a difference at ``position``, or ``None`` when no known one fits.

    Reasoning and tool calls are recognised by the text of the conversation's own reasoning and
    tool-call arguments appearing on one side only; whitespace by both sides agreeing once the
    whitespace at the difference is dropped; special tokens by the first differing token.
    """
    start = max(0, position - WINDOW_TOKENS)
    kept_window = decode(list(kept[start : position + WINDOW_TOKENS]))
    rendered_window = decode(list(rendered[start : position + WINDOW_TOKENS]))
    kept_after = decode(list(kept[position : position + WINDOW_TOKENS]))
    rendered_after = decode(list(rendered[position : position + WINDOW_TOKENS]))

    reasoning = _reasoning_texts(messages)
    if any(r in kept_after and r not in rendered_after for r in reasoning) or any(
        kept_after.count(m) > rendered_after.count(m) for m in REASONING_MARKERS
    ):
        return REASONING_REMOVED
    for text in _arguments_texts(messages):
        if (text in kept_window) != (text in rendered_window):
            return TOOL_CALL_RERENDERED

    cut = common_prefix(kept_after, rendered_after)
    kept_rest, rendered_rest = kept_after[cut:], rendered_after[cut:]
    if (kept_rest[:1].isspace() or rendered_rest[:1].isspace()) and (
        kept_rest.strip() or rendered_rest.strip()
    ):
        a, b = kept_rest.lstrip(), rendered_rest.lstrip()
        length = min(32, len(a), len(b))
        if length and a[:length] == b[:length]:
            return WHITESPACE_AT_BOUNDARY
    if (position < len(kept) and kept[position] in special_ids) or (
        position < len(rendered) and rendered[position] in special_ids
    ):
        return SPECIAL_TOKEN_DIFFERS
    return None


def snippets(kept: Sequence[int], rendered: Sequence[int], position: int, decode: Decode) -> tuple[str, str]:
    """The decoded text around ``position`` on each side, the difference at the middle."""
    start = max(0, position - SNIPPET_TOKENS)
    end = position + SNIPPET_TOKENS
    return decode(list(kept[start:end])), decode(list(rendered[start:end]))


def _literal(token: str) -> str:
    """How a token's text appears inside a template's string literals."""
    return token.replace("\n", "\\n")


def template_line(
    source: str, cause: str | None, kept_token: str, rendered_token: str, before: str = ""
) -> tuple[int, str] | None:
    """The template line most likely responsible for a difference: ``(line number, line)`` or ``None``.

    ``kept_token``/``rendered_token`` are the first differing tokens' text, ``before`` the token just
    before them (for whitespace, the line that writes ``before`` with or without what follows it).
    """
    lines = source.splitlines()
    needles: list[str] = []
    if cause == REASONING_REMOVED:
        needles = ["reasoning_content", "</think>", "thinking"]
    elif cause == TOOL_CALL_RERENDERED:
        needles = ["arguments"]
    elif cause == WHITESPACE_AT_BOUNDARY and before.strip():
        anchor = before.strip()
        if rendered_token[:1].isspace():  # the render adds whitespace the trajectory lacks
            needles = [anchor + _literal(rendered_token[:1])]
        else:  # the render drops whitespace: a literal that ends right at the anchor
            needles = [anchor + "'", anchor + '"']
    for token in (kept_token, rendered_token):
        text = token.strip()
        if text:
            needles.append(text)
    for needle in needles:
        for number, line in enumerate(lines, start=1):
            if needle in line:
                return number, line.strip()
    return None


@dataclass
class DriftTally:
    """Drift over a run, counted one finished rollout at a time: events, rollouts with any, events
    per cause, and only the first ``keep`` events themselves (a long run must not hold them all)."""

    keep: int = 20
    traced: bool = False  # whether any rollout rendered a chat template (and so was checked)
    events: int = 0
    rollouts: int = 0
    by_cause: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[str, DriftEvent]] = field(default_factory=list)

    def add(self, rollout_id: str, events: Sequence[DriftEvent], *, traced: bool) -> None:
        self.traced = self.traced or traced
        if not events:
            return
        self.rollouts += 1
        self.events += len(events)
        for event in events:
            name = CAUSE_TEXT.get(event.cause, str(event.cause))
            self.by_cause[name] = self.by_cause.get(name, 0) + 1
        room = self.keep - len(self.examples)
        self.examples.extend((rollout_id, event) for event in events[: max(room, 0)])
