"""The append-only check: each chat request must extend the conversation the gateway last saw.

A trainer aligns token ids of successive turns by assuming every request repeats the previous
request's messages plus the assistant message it returned, byte for byte. An agent that edits,
drops or reorders an earlier message still "works" over HTTP, but the training sample built from it
no longer matches what the model generated. This module finds the first place where that happens.

Messages are compared as canonical JSON (sorted keys, no whitespace), so key order does not matter
but every value does, including ``tool_calls``. A field whose value is ``null`` counts as absent: in
OpenAI's chat messages the two say the same ("no content"), and clients that rebuild the history from
their own records (agent frameworks, LiteLLM) leave such fields out when they send it back. Whether
the tokens still line up is the drift check's to say.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

Message = dict[str, Any]


def canonical(message: Any) -> str:
    """Canonical JSON of one message: sorted keys, compact separators, unicode kept, ``null`` fields left out."""
    if isinstance(message, dict):
        message = {key: value for key, value in message.items() if value is not None}
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class AppendOnlyViolation:
    """Where a request stopped extending the expected prefix, and how.

    ``turn`` is the 0-based index of the offending chat request (``-1`` for the final messages of the
    completion callback); ``index`` the first differing message position; ``kind`` is ``"modified"``
    (a message changed), ``"truncated"`` (the request is shorter than the expected prefix).
    """

    turn: int
    index: int
    kind: str
    detail: str
    expected: Message | None
    actual: Message | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        where = "final_messages" if self.turn < 0 else f"turn {self.turn}"
        return f"{where}, message {self.index}: {self.kind} ({self.detail})"


def _changed_keys(expected: Any, actual: Any) -> str:
    """Name what changed between two messages: the keys whose values differ."""
    if not isinstance(expected, dict) or not isinstance(actual, dict):
        return "message replaced by a non-object"
    keys = sorted(set(expected) | set(actual))
    parts = []
    for key in keys:
        if actual.get(key) is None and expected.get(key) is None:
            continue
        if actual.get(key) is None:
            parts.append(f"{key!r} removed")
        elif expected.get(key) is None:
            parts.append(f"{key!r} added")
        elif canonical(expected[key]) != canonical(actual[key]):
            parts.append(f"{key!r} changed")
    return ", ".join(parts) or "value changed"


def check_append_only(expected: list[Message], actual: list[Any], *, turn: int) -> AppendOnlyViolation | None:
    """Return the first violation of ``actual`` extending ``expected`` unchanged, or ``None``."""
    return check_extension(expected, [canonical(m) for m in expected], actual, turn=turn)[0]


def check_extension(
    expected: Sequence[Message], expected_keys: Sequence[str], actual: Sequence[Any], *, turn: int
) -> tuple[AppendOnlyViolation | None, list[str]]:
    """:func:`check_append_only` with the canonical JSON of ``expected`` given (cached by the caller).

    Returns the violation (or ``None``) and the canonical JSON of every ``actual`` message, so the
    caller can cache them for the next turn: each message is serialised once over a conversation.
    """
    actual_keys: list[str] = []
    violation: AppendOnlyViolation | None = None
    for index, want in enumerate(expected):
        if index >= len(actual):
            violation = AppendOnlyViolation(
                turn=turn,
                index=index,
                kind="truncated",
                detail=f"expected at least {len(expected)} messages, got {len(actual)}",
                expected=want,
                actual=None,
            )
            break
        got = actual[index]
        key = canonical(got)
        actual_keys.append(key)
        if key != expected_keys[index]:
            violation = AppendOnlyViolation(
                turn=turn,
                index=index,
                kind="modified",
                detail=_changed_keys(want, got),
                expected=want,
                actual=got if isinstance(got, dict) else {"value": got},
            )
            break
    actual_keys.extend(canonical(m) for m in actual[len(actual_keys) :])
    return violation, actual_keys
