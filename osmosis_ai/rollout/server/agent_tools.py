"""Asking the agent for its tools at init: calling ``get_tools`` safely, validating the answer once.

``get_tools`` is user code and may block. :class:`GetToolsCaller` runs a synchronous one in a worker
thread, bounded by the rollout deadline, until it has proven fast: after ``PROBE_CALLS`` consecutive
calls under ``FAST_SECONDS`` it is called inline, which saves the thread hop on every init (the
``get_tools inline`` line of ``benchmarks/rollout_server.py`` measures what that buys). An inline call
slower than ``SLOW_SECONDS`` sends it back to the thread for good, with a warning. ``async def
get_tools`` is awaited on the loop under the deadline. ``always_thread=True`` disables the inline mode.

:class:`ToolsCache` validates the returned list into tool models and keeps the last one: agents
usually return an equal list every time, so an init validates nothing, and the finished-rollout
records that keep the tools for duplicate inits share one list.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema

if TYPE_CHECKING:
    from osmosis_ai.rollout.core.schemas import RolloutRequest

logger = logging.getLogger(__name__)

PROBE_CALLS = 16
FAST_SECONDS = 0.002
SLOW_SECONDS = 0.01

_TOOLS = TypeAdapter(list[OpenAIFunctionToolSchema])


class GetToolsCaller:
    """Calls one agent's ``get_tools`` without letting it stall the event loop (see the module docstring)."""

    def __init__(
        self,
        get_tools: Callable[[RolloutRequest], Any],
        timeout: float | None,
        *,
        always_thread: bool = False,
    ):
        self._get_tools = get_tools
        self._timeout = timeout
        self._is_async = inspect.iscoroutinefunction(get_tools)
        self._fast_calls = 0
        self._pinned_to_thread = always_thread
        self.inline = False

    async def __call__(self, request: RolloutRequest) -> Any:
        if self._is_async:
            return await self._bounded(self._get_tools(request))
        if self.inline:
            started = time.perf_counter()
            tools = self._get_tools(request)
            elapsed = time.perf_counter() - started
            if elapsed > SLOW_SECONDS:
                self.inline, self._pinned_to_thread = False, True
                logger.warning(
                    "get_tools took %.1f ms on the event loop; running it in a worker thread from now on",
                    elapsed * 1000,
                )
            return tools
        loop = asyncio.get_running_loop()
        tools, elapsed = await self._bounded(loop.run_in_executor(None, self._timed, request))
        if self._pinned_to_thread:
            return tools
        if elapsed > FAST_SECONDS:
            self._fast_calls = 0
        else:
            self._fast_calls += 1
            self.inline = self._fast_calls >= PROBE_CALLS
        return tools

    def _timed(self, request: RolloutRequest) -> tuple[Any, float]:
        started = time.perf_counter()
        tools = self._get_tools(request)
        return tools, time.perf_counter() - started

    async def _bounded(self, awaitable: Any) -> Any:
        try:
            return await asyncio.wait_for(awaitable, self._timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"get_tools did not return within {self._timeout:g} s") from None


class ToolsCache:
    """Validates ``get_tools`` results into ``list[OpenAIFunctionToolSchema]``, reusing the last list.

    The cache holds a deep copy of the last input, so an agent that mutates and returns the same
    list object still gets a fresh validation. Raises ``pydantic.ValidationError`` for an item that
    is not a tool schema.
    """

    def __init__(self) -> None:
        self._snapshot: Any = None
        self._tools: list[OpenAIFunctionToolSchema] | None = None

    def __call__(self, tools: Any) -> list[OpenAIFunctionToolSchema]:
        if self._tools is not None and tools == self._snapshot:
            return self._tools
        validated = _TOOLS.validate_python(tools)
        self._snapshot, self._tools = copy.deepcopy(tools), validated
        return validated
