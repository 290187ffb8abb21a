"""Message utilities (``osmosis_ai.rollout.utils``), as tables of inputs and outputs."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_ai.rollout.tools import create_tool_error_result, create_tool_result
from osmosis_ai.rollout.utils import (
    count_messages_by_role,
    get_message_content,
    get_message_role,
    is_assistant_message,
    is_tool_error,
    is_tool_message,
    is_user_message,
    normalize_stop,
    parse_tool_calls,
)


@pytest.mark.parametrize(
    ("message", "calls"),
    [
        ({"tool_calls": [{"id": "a"}]}, [{"id": "a"}]),
        ({"tool_calls": None}, []),
        ({}, []),
        ({"tool_calls": "x"}, []),
    ],
)
def test_parse_tool_calls(message: dict[str, Any], calls: list[Any]) -> None:
    assert parse_tool_calls(message) == calls


@pytest.mark.parametrize(
    ("stop", "expected"),
    [(None, None), ("x", ["x"]), (["a", 1], ["a", "1"]), ([], []), (("a",), None), (5, None)],
)
def test_normalize_stop(stop: Any, expected: Any) -> None:
    assert normalize_stop(stop) == expected


@pytest.mark.parametrize(
    ("message", "content", "role"),
    [
        ({"role": "user", "content": "hi"}, "hi", "user"),
        ({"role": "assistant", "content": None}, "", "assistant"),
        ({"content": [{"type": "text"}]}, "", "unknown"),
        ({"role": 3}, "", "unknown"),
    ],
)
def test_content_and_role(message: dict[str, Any], content: str, role: str) -> None:
    assert get_message_content(message) == content
    assert get_message_role(message) == role


def test_role_predicates_and_counts() -> None:
    messages = [
        {"role": "system"},
        {"role": "user"},
        {"role": "assistant"},
        {"role": "tool"},
        {"role": "assistant"},
        {},
    ]
    assert [is_user_message(m) for m in messages] == [False, True, False, False, False, False]
    assert [is_assistant_message(m) for m in messages] == [False, False, True, False, True, False]
    assert [is_tool_message(m) for m in messages] == [False, False, False, True, False, False]
    assert count_messages_by_role(messages) == {
        "system": 1,
        "user": 1,
        "assistant": 2,
        "tool": 1,
        "unknown": 1,
    }


@pytest.mark.parametrize(
    ("message", "failed"),
    [
        (create_tool_error_result("c", "z is missing"), True),
        (create_tool_result("c", "19"), False),
        ({"role": "assistant", "content": "Error: not a tool message"}, False),
        ({"role": "tool", "content": ["Error: ", "a list"]}, False),
        ({"role": "tool"}, False),
    ],
)
def test_is_tool_error(message: dict[str, Any], failed: bool) -> None:
    assert is_tool_error(message) is failed
