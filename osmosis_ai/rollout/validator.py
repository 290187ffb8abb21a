"""Static checks of an agent loop before serving it: name, tools, run method.

``validate_agent_loop`` calls ``get_tools`` once with a probe request (awaiting it, as the server
does, when it is declared ``async def``) and inspects (never calls) ``run``. Every problem is
collected, errors and warnings alike; ``ValidationResult`` is truthy when the agent is valid. Dict
tools are also coerced through ``OpenAIFunctionToolSchema`` exactly as the server's init response
does, so a tool that validation accepts cannot make init fail.

Codes: MISSING_NAME, INVALID_NAME_TYPE, EMPTY_NAME, GET_TOOLS_EXCEPTION, GET_TOOLS_RETURNS_NONE,
GET_TOOLS_INVALID_TYPE, INVALID_TOOL_TYPE, MISSING_TOOL_TYPE, UNKNOWN_TOOL_TYPE (warning),
MISSING_FUNCTION, INVALID_FUNCTION_TYPE, MISSING_FUNCTION_NAME, INVALID_FUNCTION_NAME,
MISSING_FUNCTION_DESCRIPTION (warning), INVALID_PARAMETERS_TYPE, PARAMETERS_TYPE_NOT_OBJECT (warning),
INVALID_TOOL_SCHEMA, MISSING_RUN_METHOD, RUN_NOT_CALLABLE, RUN_NOT_ASYNC.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import pydantic

from osmosis_ai._sync import run_sync
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError
from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema, RolloutRequest


class AgentLoopValidationError(OsmosisRolloutError):
    """An agent loop failed validation; ``errors`` lists the ``ValidationError`` entries."""

    def __init__(self, message: str, errors: list[ValidationError] | None = None) -> None:
        super().__init__(message)
        self.errors: list[ValidationError] = list(errors or [])


@dataclass
class ValidationError:
    """One finding: a stable ``code``, a message, the ``field`` it concerns and optional ``details``."""

    code: str
    message: str
    field: str | None = None
    details: dict[str, Any] | None = None

    def __str__(self) -> str:
        if self.field:
            return f"[{self.code}] {self.field}: {self.message}"
        return f"[{self.code}] {self.message}"


@dataclass
class ValidationResult:
    """All findings for one agent loop. ``bool(result)`` is ``result.valid``."""

    valid: bool
    errors: list[ValidationError] = field(default_factory=list)
    warnings: list[ValidationError] = field(default_factory=list)
    agent_name: str | None = None
    tool_count: int = 0

    def __bool__(self) -> bool:
        return self.valid

    def raise_if_invalid(self) -> None:
        """Raise ``AgentLoopValidationError`` listing every error, if there is any."""
        if self.valid:
            return
        lines = [f"Agent loop validation failed with {len(self.errors)} error(s):"]
        lines += [f"  - {error}" for error in self.errors]
        raise AgentLoopValidationError("\n".join(lines), self.errors)


def _probe_request() -> RolloutRequest:
    return RolloutRequest(
        rollout_id="validation-test-rollout",
        server_url="http://localhost:8080",
        messages=[{"role": "user", "content": "Hello"}],
        completion_params={"temperature": 1.0, "max_tokens": 512},
        metadata={"_validation": True},
    )


class _Findings:
    def __init__(self) -> None:
        self.errors: list[ValidationError] = []
        self.warnings: list[ValidationError] = []

    def error(
        self, code: str, message: str, field: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        self.errors.append(ValidationError(code, message, field, details))

    def warn(self, code: str, message: str, field: str | None = None) -> None:
        self.warnings.append(ValidationError(code, message, field))


def _check_name(agent_loop: Any, found: _Findings) -> str | None:
    name = getattr(agent_loop, "name", None)
    if name is None:
        found.error(
            "MISSING_NAME", "the agent loop has no 'name'; set a class attribute name = '...'", "name"
        )
        return None
    if not isinstance(name, str):
        found.error(
            "INVALID_NAME_TYPE", f"'name' must be a string, got {type(name).__name__} {name!r}", "name"
        )
        return None
    if not name.strip():
        found.error("EMPTY_NAME", "'name' is blank; give the agent loop a non-empty name", "name")
    return name


def _check_function(function: dict[str, Any], where: str, found: _Findings) -> None:
    if "name" not in function:
        found.error("MISSING_FUNCTION_NAME", "the function has no 'name'", f"{where}.function.name")
    elif not isinstance(function["name"], str) or not function["name"].strip():
        found.error(
            "INVALID_FUNCTION_NAME",
            f"the function name must be a non-blank string, got {function['name']!r}",
            f"{where}.function.name",
        )
    if "description" not in function:
        found.warn(
            "MISSING_FUNCTION_DESCRIPTION",
            "the function has no 'description'; the model needs one to use the tool well",
            f"{where}.function.description",
        )
    if "parameters" in function:
        parameters = function["parameters"]
        if not isinstance(parameters, dict):
            found.error(
                "INVALID_PARAMETERS_TYPE",
                f"'parameters' must be an object, got {type(parameters).__name__}",
                f"{where}.function.parameters",
            )
        elif parameters.get("type") != "object":
            found.warn(
                "PARAMETERS_TYPE_NOT_OBJECT",
                f"'parameters.type' should be 'object', got {parameters.get('type')!r}",
                f"{where}.function.parameters.type",
            )


def _check_schema_coercion(tool: dict[str, Any], where: str, found: _Findings) -> None:
    """The init response coerces dict tools into the schema model; report what it would reject."""
    try:
        OpenAIFunctionToolSchema.model_validate(tool)
    except pydantic.ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(tool)'}: {e['msg']}" for e in exc.errors()]
        found.error(
            "INVALID_TOOL_SCHEMA",
            "the tool does not fit OpenAIFunctionToolSchema, so the init request would fail: "
            + "; ".join(problems),
            where,
            {"errors": problems},
        )


def _check_tool(tool: Any, index: int, found: _Findings) -> None:
    where = f"tools[{index}]"
    if isinstance(tool, OpenAIFunctionToolSchema):
        return
    if not isinstance(tool, dict):
        found.error(
            "INVALID_TOOL_TYPE",
            f"a tool must be an OpenAIFunctionToolSchema or a dict, got {type(tool).__name__}",
            where,
        )
        return
    errors_before = len(found.errors)
    if "type" not in tool:
        found.error("MISSING_TOOL_TYPE", "the tool has no 'type'; use 'function'", where)
    elif tool["type"] != "function":
        found.warn("UNKNOWN_TOOL_TYPE", f"tool type {tool['type']!r} is not 'function'", f"{where}.type")
    if "function" not in tool:
        found.error("MISSING_FUNCTION", "the tool has no 'function' object", where)
    elif not isinstance(tool["function"], dict):
        found.error(
            "INVALID_FUNCTION_TYPE",
            f"'function' must be an object, got {type(tool['function']).__name__}",
            f"{where}.function",
        )
    else:
        _check_function(tool["function"], where, found)
    if len(found.errors) == errors_before:
        _check_schema_coercion(tool, where, found)


def _call_get_tools(agent_loop: Any, request: RolloutRequest) -> Any:
    get_tools = agent_loop.get_tools
    if inspect.iscoroutinefunction(get_tools):
        return run_sync(get_tools(request))
    return get_tools(request)


def _check_tools(agent_loop: Any, request: RolloutRequest, found: _Findings) -> int:
    try:
        tools = _call_get_tools(agent_loop, request)
    except Exception as exc:
        found.error(
            "GET_TOOLS_EXCEPTION",
            f"get_tools() raised {type(exc).__name__}: {exc}",
            "get_tools",
            {"exception_type": type(exc).__name__, "exception_message": str(exc)},
        )
        return 0
    if tools is None:
        found.error(
            "GET_TOOLS_RETURNS_NONE", "get_tools() returned None; return a list (maybe empty)", "get_tools"
        )
        return 0
    if inspect.iscoroutine(tools):
        tools.close()  # never awaited: close it so Python does not warn about it
        found.error(
            "GET_TOOLS_INVALID_TYPE",
            "get_tools() returned a coroutine without being declared 'async def'; the server would not "
            "await it: declare it 'async def get_tools(self, request)' or return a list",
            "get_tools",
        )
        return 0
    if not isinstance(tools, list):
        found.error(
            "GET_TOOLS_INVALID_TYPE",
            f"get_tools() must return a list, got {type(tools).__name__}",
            "get_tools",
        )
        return 0
    for index, tool in enumerate(tools):
        _check_tool(tool, index, found)
    return len(tools)


def _check_run(agent_loop: Any, found: _Findings) -> None:
    if not hasattr(agent_loop, "run"):
        found.error("MISSING_RUN_METHOD", "the agent loop has no run() method", "run")
        return
    run = agent_loop.run
    if not callable(run):
        found.error("RUN_NOT_CALLABLE", f"'run' must be a method, got {type(run).__name__}", "run")
    elif not inspect.iscoroutinefunction(run):
        found.error(
            "RUN_NOT_ASYNC",
            "run() must be a coroutine function: declare it 'async def run(self, ctx)'",
            "run",
        )


def validate_agent_loop(agent_loop: Any, *, request: RolloutRequest | None = None) -> ValidationResult:
    """Check ``agent_loop`` without network access; ``request`` replaces the probe passed to get_tools."""
    found = _Findings()
    name = _check_name(agent_loop, found)
    tool_count = _check_tools(agent_loop, request if request is not None else _probe_request(), found)
    _check_run(agent_loop, found)
    return ValidationResult(
        valid=not found.errors,
        errors=found.errors,
        warnings=found.warnings,
        agent_name=name,
        tool_count=tool_count,
    )
