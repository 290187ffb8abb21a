"""Helpers for running the model's tool calls and turning their outputs into ``role: "tool"`` messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from osmosis_ai.rollout.core.exceptions import ToolArgumentError
from osmosis_ai.rollout.core.schemas import MessageDict
from osmosis_ai.rollout.utils import TOOL_ERROR_PREFIX


def create_tool_result(tool_call_id: str, content: str) -> MessageDict:
    """The tool message answering ``tool_call_id``."""
    return {"role": "tool", "content": content, "tool_call_id": tool_call_id}


def create_tool_error_result(tool_call_id: str, error_message: str) -> MessageDict:
    """A tool message reporting a failure (content ``"Error: <message>"``), so the model can recover."""
    return create_tool_result(tool_call_id, TOOL_ERROR_PREFIX + error_message)


def serialize_tool_result(result: Any) -> str:
    """Tool output as message text: strings unchanged, numbers via ``str``, booleans and the rest as JSON.

    Raises ``TypeError`` for values JSON cannot represent.
    """
    if isinstance(result, bool):
        return json.dumps(result)
    if isinstance(result, (int, float)):
        return str(result)
    if isinstance(result, str):
        return result
    return json.dumps(result)


def parse_tool_arguments(arguments: Any) -> dict[str, Any]:
    """Arguments of a tool call as a dict: a dict as is, a JSON object string decoded.

    Raises ``ToolArgumentError`` for invalid JSON, JSON that is not an object, or another type.
    """
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        raise ToolArgumentError(
            f"tool arguments must be a JSON object string or a dict, got {type(arguments).__name__}"
        )
    try:
        decoded = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(
            f"tool arguments are not valid JSON: {exc.msg} (in {arguments[:200]!r})"
        ) from exc
    if not isinstance(decoded, dict):
        raise ToolArgumentError(
            f"tool arguments must decode to a JSON object, got {type(decoded).__name__} (in {arguments[:200]!r})"
        )
    return decoded


def get_tool_call_info(tool_call: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(id, function name, arguments)`` of an OpenAI tool call; defaults ``"unknown"``, ``""``, ``{}``.

    Raises ``ToolArgumentError`` (with ``tool_call_id``/``tool_name``) when the arguments cannot be
    parsed or ``function`` is present but not an object (``null`` included).
    """
    call_id = tool_call.get("id") or "unknown"
    function = tool_call.get("function", {})
    if not isinstance(function, dict):
        raise ToolArgumentError(
            f"tool call {call_id!r} has 'function' of type {type(function).__name__}; expected an object "
            '{"name": ..., "arguments": ...}',
            tool_call_id=str(call_id),
        )
    name = function.get("name") or ""
    raw_arguments = function.get("arguments")
    if raw_arguments is None:
        return str(call_id), str(name), {}
    try:
        arguments = parse_tool_arguments(raw_arguments)
    except ToolArgumentError as exc:
        raise ToolArgumentError(str(exc), tool_call_id=str(call_id), tool_name=str(name)) from exc
    return str(call_id), str(name), arguments


async def execute_tool_calls(
    tool_calls: list[dict[str, Any]],
    executor: Callable[[dict[str, Any]], Awaitable[MessageDict]],
) -> list[MessageDict]:
    """Run ``executor(call)`` for every call concurrently; results come back in input order.

    Every call runs to completion even when one fails; then the first failure (in input order) is
    raised. Nothing is left running in the background.
    """
    if not tool_calls:
        return []
    outcomes = await asyncio.gather(*(executor(call) for call in tool_calls), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return list(outcomes)  # type: ignore[arg-type]  # no exceptions remain
