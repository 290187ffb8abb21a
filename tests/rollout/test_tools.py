"""Tool-call helpers (``osmosis_ai.rollout.tools``), as tables of inputs and outputs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError, ToolArgumentError
from osmosis_ai.rollout.tools import (
    create_tool_error_result,
    create_tool_result,
    execute_tool_calls,
    get_tool_call_info,
    parse_tool_arguments,
    serialize_tool_result,
)


def test_tool_results() -> None:
    assert create_tool_result("c1", "3") == {"role": "tool", "content": "3", "tool_call_id": "c1"}
    assert create_tool_error_result("c1", "division by zero") == {
        "role": "tool",
        "content": "Error: division by zero",
        "tool_call_id": "c1",
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (2.5, "2.5"),
        ("as is", "as is"),
        (None, "null"),
        ({"a": [1, 2]}, '{"a": [1, 2]}'),
        ([1, "x"], '[1, "x"]'),
    ],
)
def test_serialize_tool_result(value: Any, text: str) -> None:
    assert serialize_tool_result(value) == text


def test_serialize_tool_result_rejects_unserializable() -> None:
    with pytest.raises(TypeError):
        serialize_tool_result({1, 2})


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [({"a": 1}, {"a": 1}), ('{"a": 1}', {"a": 1}), ("{}", {})],
)
def test_parse_tool_arguments(arguments: Any, expected: dict[str, Any]) -> None:
    assert parse_tool_arguments(arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must decode to a JSON object, got list"),
        ('"text"', "must decode to a JSON object, got str"),
        (42, "got int"),
        (None, "got NoneType"),
    ],
)
def test_parse_tool_arguments_errors(arguments: Any, match: str) -> None:
    with pytest.raises(ToolArgumentError, match=match) as exc:
        parse_tool_arguments(arguments)
    assert isinstance(exc.value, OsmosisRolloutError)


@pytest.mark.parametrize(
    ("call", "info"),
    [
        (
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
            ("c1", "add", {"a": 1, "b": 2}),
        ),
        ({"function": {"name": "f", "arguments": {"x": 1}}}, ("unknown", "f", {"x": 1})),
        ({"id": "c2"}, ("c2", "", {})),
        ({"id": "c3", "function": {"name": "f", "arguments": None}}, ("c3", "f", {})),
    ],
)
def test_get_tool_call_info(call: dict[str, Any], info: tuple[str, str, dict[str, Any]]) -> None:
    assert get_tool_call_info(call) == info


@pytest.mark.parametrize(
    ("call", "call_id", "name"),
    [
        ({"id": "c1", "function": {"name": "add", "arguments": "{oops"}}, "c1", "add"),
        ({"id": "c2", "function": None}, "c2", ""),
        ({"id": "c3", "function": "add"}, "c3", ""),
    ],
)
def test_get_tool_call_info_errors(call: dict[str, Any], call_id: str, name: str) -> None:
    with pytest.raises(ToolArgumentError) as exc:
        get_tool_call_info(call)
    assert (exc.value.tool_call_id, exc.value.tool_name) == (call_id, name)


async def test_execute_tool_calls_keeps_input_order() -> None:
    async def executor(call: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(call["delay"])
        return create_tool_result(call["id"], call["id"])

    calls = [{"id": "slow", "delay": 0.05}, {"id": "fast", "delay": 0.0}]
    assert [r["tool_call_id"] for r in await execute_tool_calls(calls, executor)] == ["slow", "fast"]
    assert await execute_tool_calls([], executor) == []


async def test_execute_tool_calls_never_abandons_siblings() -> None:
    finished: list[str] = []

    async def executor(call: dict[str, Any]) -> dict[str, Any]:
        if call["id"] == "bad":
            raise ToolArgumentError("bad arguments", tool_call_id="bad")
        await asyncio.sleep(0.05)
        finished.append(call["id"])
        return create_tool_result(call["id"], "ok")

    with pytest.raises(ToolArgumentError, match="bad arguments"):
        await execute_tool_calls([{"id": "a"}, {"id": "bad"}, {"id": "b"}], executor)
    assert sorted(finished) == ["a", "b"]  # both siblings ran to completion before the error surfaced


async def test_execute_tool_calls_raises_the_first_failure_in_input_order() -> None:
    async def executor(call: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(call["delay"])
        raise ValueError(call["id"])

    with pytest.raises(ValueError, match="first"):
        await execute_tool_calls([{"id": "first", "delay": 0.03}, {"id": "second", "delay": 0.0}], executor)
