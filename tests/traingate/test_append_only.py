"""The append-only check on its own: which edits are caught, and how they are described."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_ai.traingate.append_only import check_append_only

SYSTEM = {"role": "system", "content": "calc"}
USER = {"role": "user", "content": "What is 2 + 3?"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    ],
}
EXPECTED = [SYSTEM, USER, CALL]


@pytest.mark.parametrize(
    ("actual", "violation"),
    [
        ([SYSTEM, USER, CALL], None),
        ([SYSTEM, USER, CALL, {"role": "tool", "tool_call_id": "call_0", "content": "5"}], None),
        (
            [SYSTEM, USER, {"tool_calls": CALL["tool_calls"], "content": "", "role": "assistant"}],
            None,
        ),  # key order
        ([SYSTEM, USER, {**CALL, "name": None}], None),  # a null field is an absent one
        ([SYSTEM, USER, {**CALL, "content": None}], (2, "modified", "'content' removed")),
        ([SYSTEM, {"role": "user", "content": "What is 2+3?"}, CALL], (1, "modified", "'content' changed")),
        ([SYSTEM, USER, {"role": "assistant", "content": ""}], (2, "modified", "'tool_calls' removed")),
        ([SYSTEM, USER, {**CALL, "name": "x"}], (2, "modified", "'name' added")),
        ([SYSTEM, USER], (2, "truncated", "expected at least 3 messages, got 2")),
        ([USER, SYSTEM, CALL], (0, "modified", "'content' changed, 'role' changed")),
        ([SYSTEM, "user: hi", CALL], (1, "modified", "message replaced by a non-object")),
    ],
)
def test_check_append_only(actual: list[Any], violation: tuple[int, str, str] | None) -> None:
    found = check_append_only(EXPECTED, actual, turn=3)
    if violation is None:
        assert found is None
        return
    assert found is not None
    assert (found.index, found.kind, found.detail) == violation
    assert found.turn == 3
    assert found.expected == EXPECTED[found.index]
    assert found.describe().startswith(f"turn 3, message {found.index}: {found.kind}")


def test_a_changed_tool_call_argument_is_caught() -> None:
    edited = {
        **CALL,
        "tool_calls": [{**CALL["tool_calls"][0], "function": {"name": "add", "arguments": "{}"}}],
    }
    found = check_append_only(EXPECTED, [SYSTEM, USER, edited], turn=1)
    assert found is not None and found.detail == "'tool_calls' changed"
    assert found.to_dict()["actual"] == edited
