"""Asking the agent for its tools at init: calling ``get_tools`` safely, validating the answer once.

``get_tools`` is user code and may block, or turn slow after any number of fast calls.
:class:`GetToolsCaller` therefore always runs a synchronous one in a worker thread and an ``async def``
one in its own task, both bounded by the rollout deadline: the event loop never waits for it, and
whatever it raises (``SystemExit`` included) fails only that init. The threads are the server's own
:class:`~osmosis_ai._usercode.UserThreads`: daemon threads, so a call still blocked after its
deadline cannot keep the process from exiting, and a blocked call holds only its own thread.

:class:`ToolsCache` validates the returned list into tool models and keeps the last one: agents
usually return an equal list every time, so an init validates nothing, and the finished-rollout
records that keep the tools for duplicate inits share one list.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from osmosis_ai._usercode import UserThreads, contain
from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema

if TYPE_CHECKING:
    from osmosis_ai.rollout.core.schemas import RolloutRequest

_TOOLS = TypeAdapter(list[OpenAIFunctionToolSchema])
_THREADS = UserThreads(name="osmosis-get-tools")


class GetToolsCaller:
    """Calls one agent's ``get_tools`` without letting it stall the event loop (see the module docstring)."""

    def __init__(self, get_tools: Callable[[RolloutRequest], Any], timeout: float | None) -> None:
        self._get_tools = get_tools
        self._timeout = timeout
        self._is_async = inspect.iscoroutinefunction(get_tools)

    async def __call__(self, request: RolloutRequest) -> Any:
        call: Awaitable[Any]
        if self._is_async:
            call = contain(lambda: self._get_tools(request))
        else:
            call = _THREADS.call(self._get_tools, request)
        try:
            return await asyncio.wait_for(call, self._timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"get_tools did not return within {self._timeout:g} s") from None


class ToolsCache:
    """Validates ``get_tools`` results into ``list[OpenAIFunctionToolSchema]``, reusing the last list.

    The cache holds a deep copy of the last input and validates that copy, so an agent that mutates
    and returns the same list object still gets a fresh validation and cannot change tools already
    validated (the models keep extra JSON-Schema keywords by reference). Raises
    ``pydantic.ValidationError`` for an item that is not a tool schema.
    """

    def __init__(self) -> None:
        self._snapshot: Any = None
        self._tools: list[OpenAIFunctionToolSchema] | None = None

    def __call__(self, tools: Any) -> list[OpenAIFunctionToolSchema]:
        if self._tools is not None and tools == self._snapshot:
            return self._tools
        snapshot = copy.deepcopy(tools)
        validated = _TOOLS.validate_python(snapshot)
        self._snapshot, self._tools = snapshot, validated
        return validated
