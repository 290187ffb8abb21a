"""The validator's codes: one row per finding, plus the result object and its exception."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_ai.rollout.core.base import RolloutAgentLoop, RolloutContext, RolloutResult
from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema, RolloutRequest
from osmosis_ai.rollout.validator import (
    AgentLoopValidationError,
    ValidationError,
    ValidationResult,
    validate_agent_loop,
)

GOOD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]},
    },
}


class Duck:
    """A duck-typed agent loop whose parts each test replaces."""

    name: Any = "duck"

    def __init__(self, tools: Any = None, **attributes: Any) -> None:
        self.tools = [GOOD_TOOL] if tools is None else tools
        for key, value in attributes.items():
            setattr(self, key, value)

    def get_tools(self, request: RolloutRequest) -> Any:
        return self.tools

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        return ctx.complete([])


def _function(**changes: Any) -> dict[str, Any]:
    function = {**GOOD_TOOL["function"], **changes}  # type: ignore[dict-item]
    return {"type": "function", "function": {k: v for k, v in function.items() if v is not _DROP}}


_DROP = object()


def _raise(request: RolloutRequest) -> Any:
    raise RuntimeError("no tools today")


async def _async_tools(request: RolloutRequest) -> Any:
    return [GOOD_TOOL]


def _coroutine_from_a_plain_function(request: RolloutRequest) -> Any:
    return _async_tools(request)


def _sync_run(ctx: RolloutContext) -> Any:
    return None


# (agent, expected error codes with fields, expected warning codes)
CASES: list[tuple[str, Any, list[tuple[str, str | None]], list[str]]] = [
    ("valid", Duck(), [], []),
    ("valid schema instance", Duck(tools=[OpenAIFunctionToolSchema.model_validate(GOOD_TOOL)]), [], []),
    ("missing name", Duck(name=None), [("MISSING_NAME", "name")], []),
    ("name not str", Duck(name=3), [("INVALID_NAME_TYPE", "name")], []),
    ("blank name", Duck(name="  "), [("EMPTY_NAME", "name")], []),
    ("get_tools raises", Duck(get_tools=_raise), [("GET_TOOLS_EXCEPTION", "get_tools")], []),
    ("get_tools None", Duck(get_tools=lambda request: None), [("GET_TOOLS_RETURNS_NONE", "get_tools")], []),
    ("get_tools tuple", Duck(tools=(GOOD_TOOL,)), [("GET_TOOLS_INVALID_TYPE", "get_tools")], []),
    ("async get_tools", Duck(get_tools=_async_tools), [], []),
    (
        "plain get_tools returning a coroutine",
        Duck(get_tools=_coroutine_from_a_plain_function),
        [("GET_TOOLS_INVALID_TYPE", "get_tools")],
        [],
    ),
    ("tool not dict", Duck(tools=["add"]), [("INVALID_TOOL_TYPE", "tools[0]")], []),
    (
        "no tool type",
        Duck(tools=[{"function": GOOD_TOOL["function"]}]),
        [("MISSING_TOOL_TYPE", "tools[0]")],
        [],
    ),
    ("odd tool type", Duck(tools=[{**GOOD_TOOL, "type": "retrieval"}]), [], ["UNKNOWN_TOOL_TYPE"]),
    ("no function", Duck(tools=[{"type": "function"}]), [("MISSING_FUNCTION", "tools[0]")], []),
    (
        "function not dict",
        Duck(tools=[GOOD_TOOL, {"type": "function", "function": "add"}]),
        [("INVALID_FUNCTION_TYPE", "tools[1].function")],
        [],
    ),
    (
        "no function name",
        Duck(tools=[_function(name=_DROP)]),
        [("MISSING_FUNCTION_NAME", "tools[0].function.name")],
        [],
    ),
    (
        "blank function name",
        Duck(tools=[_function(name=" ")]),
        [("INVALID_FUNCTION_NAME", "tools[0].function.name")],
        [],
    ),
    (
        "function name not str",
        Duck(tools=[_function(name=7)]),
        [("INVALID_FUNCTION_NAME", "tools[0].function.name")],
        [],
    ),
    (
        "no description: warned and, since init would fail, an error",
        Duck(tools=[_function(description=_DROP)]),
        [("INVALID_TOOL_SCHEMA", "tools[0]")],
        ["MISSING_FUNCTION_DESCRIPTION"],
    ),
    (
        "parameters not dict",
        Duck(tools=[_function(parameters=[])]),
        [("INVALID_PARAMETERS_TYPE", "tools[0].function.parameters")],
        [],
    ),
    (
        "parameters type not object",
        Duck(tools=[_function(parameters={"type": "array", "properties": {}, "required": []})]),
        [],
        ["PARAMETERS_TYPE_NOT_OBJECT"],
    ),
    (
        "parameters without properties",
        Duck(tools=[_function(parameters={"type": "object"})]),
        [("INVALID_TOOL_SCHEMA", "tools[0]")],
        [],
    ),
    (
        "non-string enum and nested keywords are fine",
        Duck(
            tools=[
                _function(
                    parameters={
                        "type": "object",
                        "properties": {
                            "x": {"type": "integer", "enum": [1]},
                            "xs": {"type": "array", "items": {"type": "object", "properties": {}}},
                        },
                        "required": [],
                    }
                )
            ]
        ),
        [],
        [],
    ),
    (
        "property without a type",
        Duck(
            tools=[
                _function(parameters={"type": "object", "properties": {"x": {"enum": ["a"]}}, "required": []})
            ]
        ),
        [("INVALID_TOOL_SCHEMA", "tools[0]")],
        [],
    ),
    ("no parameters is fine", Duck(tools=[_function(parameters=_DROP)]), [], []),
    ("run not callable", Duck(run="later"), [("RUN_NOT_CALLABLE", "run")], []),
    ("run not async", Duck(run=_sync_run), [("RUN_NOT_ASYNC", "run")], []),
]


@pytest.mark.parametrize(("agent", "errors", "warnings"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_codes(agent: Any, errors: list[tuple[str, str | None]], warnings: list[str]) -> None:
    result = validate_agent_loop(agent)
    assert [(e.code, e.field) for e in result.errors] == errors
    assert [w.code for w in result.warnings] == warnings
    assert result.valid is (not errors)
    assert bool(result) is result.valid


def test_missing_run_method() -> None:
    class NoRun:
        name = "x"

        def get_tools(self, request: RolloutRequest) -> list[Any]:
            return []

    result = validate_agent_loop(NoRun())
    assert [e.code for e in result.errors] == ["MISSING_RUN_METHOD"]


def test_all_stages_run_and_details_are_kept() -> None:
    result = validate_agent_loop(Duck(name=None, get_tools=_raise, run=_sync_run))
    assert [e.code for e in result.errors] == ["MISSING_NAME", "GET_TOOLS_EXCEPTION", "RUN_NOT_ASYNC"]
    assert result.errors[1].details == {
        "exception_type": "RuntimeError",
        "exception_message": "no tools today",
    }
    assert (result.agent_name, result.tool_count) == (None, 0)


def test_invalid_tool_schema_message_names_the_missing_field() -> None:
    result = validate_agent_loop(Duck(tools=[_function(description=_DROP)]))
    assert "function.description: Field required" in result.errors[0].message
    assert result.errors[0].details == {"errors": ["function.description: Field required"]}


def test_probe_request_and_custom_request() -> None:
    seen: list[RolloutRequest] = []

    def record(request: RolloutRequest) -> list[Any]:
        seen.append(request)
        return [GOOD_TOOL, GOOD_TOOL]

    result = validate_agent_loop(Duck(get_tools=record))
    probe = seen[0]
    assert (probe.rollout_id, probe.server_url, probe.metadata) == (
        "validation-test-rollout",
        "http://localhost:8080",
        {"_validation": True},
    )
    assert probe.messages == [{"role": "user", "content": "Hello"}]
    assert probe.completion_params == {"temperature": 1.0, "max_tokens": 512}
    assert (result.agent_name, result.tool_count) == ("duck", 2)
    custom = probe.model_copy(update={"rollout_id": "mine"})
    validate_agent_loop(Duck(get_tools=record), request=custom)
    assert seen[1].rollout_id == "mine"


def test_real_agent_loop_subclass_validates() -> None:
    class Calc(RolloutAgentLoop):
        name = "calc"

        def get_tools(self, request: RolloutRequest) -> list[OpenAIFunctionToolSchema]:
            return [OpenAIFunctionToolSchema.model_validate(GOOD_TOOL)]

        async def run(self, ctx: RolloutContext) -> RolloutResult:
            return ctx.complete([])

    assert validate_agent_loop(Calc()).valid


def test_error_text_and_raise_if_invalid() -> None:
    assert str(ValidationError("CODE", "message", "field")) == "[CODE] field: message"
    assert str(ValidationError("CODE", "message")) == "[CODE] message"
    ValidationResult(valid=True).raise_if_invalid()
    result = validate_agent_loop(Duck(name=None, run=_sync_run))
    with pytest.raises(AgentLoopValidationError) as exc:
        result.raise_if_invalid()
    lines = str(exc.value).splitlines()
    assert lines[0] == "Agent loop validation failed with 2 error(s):"
    assert lines[1].startswith("  - [MISSING_NAME] name: ")
    assert lines[2].startswith("  - [RUN_NOT_ASYNC] run: ")
    assert exc.value.errors == result.errors
    assert AgentLoopValidationError("x").errors == []


async def test_async_get_tools_is_awaited_even_from_a_running_event_loop() -> None:
    async def tools_with_a_bad_one(request: RolloutRequest) -> Any:
        return [GOOD_TOOL, {"type": "function"}]

    result = validate_agent_loop(Duck(get_tools=tools_with_a_bad_one))
    assert [(e.code, e.field) for e in result.errors] == [("MISSING_FUNCTION", "tools[1]")]
    assert result.tool_count == 2


def test_an_async_get_tools_that_raises_is_reported() -> None:
    async def broken(request: RolloutRequest) -> Any:
        raise RuntimeError("no tools today")

    result = validate_agent_loop(Duck(get_tools=broken))
    assert [e.code for e in result.errors] == ["GET_TOOLS_EXCEPTION"]
    assert result.errors[0].details == {
        "exception_type": "RuntimeError",
        "exception_message": "no tools today",
    }
