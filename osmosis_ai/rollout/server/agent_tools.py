"""Asking the agent for its tools at init: calling ``get_tools`` safely, serializing the answer once.

``get_tools`` is user code and synchronous in 0.2's API, so it may block. :class:`GetToolsCaller`
runs it in a worker thread, bounded by the rollout deadline (0.2 ran it on the event loop without a
limit, D21) — until it has proven fast: after ``PROBE_CALLS`` consecutive calls under
``FAST_SECONDS`` it is called inline, which saves a thread hop per init (and, under a burst of
thousands of inits, several KiB of queued work per rollout). An inline call slower than
``SLOW_SECONDS`` sends it back to the thread for good, with a warning. ``async def get_tools`` is
awaited on the loop under the deadline. ``always_thread=True`` disables the inline mode.

:class:`ToolsSerializer` turns the returned list into the init response's ``tools`` JSON (0.2's
shape, nulls included) and reuses the bytes while the agent keeps returning an equal list. Equal JSON
is also handed out as one shared bytes object (interned, bounded), so the finished-rollout records
that keep it for duplicate inits share it even when ``get_tools`` alternates between a few lists.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from osmosis_ai.rollout.core.schemas import RolloutRequest

logger = logging.getLogger(__name__)

PROBE_CALLS = 16
MAX_INTERNED = 64  # distinct tool lists remembered for sharing
MAX_INTERNED_BYTES = 4 * 1024 * 1024
FAST_SECONDS = 0.002
SLOW_SECONDS = 0.01


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


class ToolsSerializer:
    """Serializes ``get_tools`` results into the init response's ``tools`` JSON, caching the last one.

    The cache holds a deep copy of the last input, so an agent that mutates and returns the same
    list object still gets a fresh serialization. ``exclude_none`` drops the ``null`` fields that 0.2
    sent (``"description": null``, ``"enum": null``), for consumers that reject them (D6).
    """

    def __init__(self, *, exclude_none: bool = False) -> None:
        self._exclude_none = exclude_none
        self._snapshot: Any = None
        self._json: bytes | None = None
        self._adapter: TypeAdapter[Any] | None = None
        self._interned: dict[bytes, bytes] = {}  # insertion order = least recently used first
        self._interned_bytes = 0

    def __call__(self, tools: Any) -> bytes:
        if self._json is not None and tools == self._snapshot:
            return self._json
        if self._adapter is None:
            from pydantic import TypeAdapter

            from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema

            self._adapter = TypeAdapter(list[OpenAIFunctionToolSchema])
        encoded = self._adapter.dump_json(
            self._adapter.validate_python(tools), exclude_none=self._exclude_none
        )
        encoded = self._intern(encoded)
        self._snapshot, self._json = copy.deepcopy(tools), encoded
        return encoded

    def _intern(self, encoded: bytes) -> bytes:
        """The equal bytes object handed out before, if still remembered (most recent kept, bounded)."""
        table = self._interned
        known = table.pop(encoded, None)
        if known is not None:
            table[known] = known
            return known
        table[encoded] = encoded
        self._interned_bytes += len(encoded)
        while len(table) > MAX_INTERNED or self._interned_bytes > MAX_INTERNED_BYTES:
            oldest = next(iter(table))
            del table[oldest]
            self._interned_bytes -= len(oldest)
        return encoded
