"""Asking the agent for its tools at init: calling ``get_tools`` safely, validating the answer once.

``get_tools`` is user code and may block, or turn slow after any number of fast calls.
:class:`GetToolsCaller` therefore always runs a synchronous one in a worker thread and an ``async def``
one in its own task, both bounded by the rollout deadline: the event loop never waits for it, and
whatever it raises (``SystemExit`` included) fails only that init.

The worker threads are :class:`ToolsThreads`, not the loop's default executor, for two reasons. They
are daemon threads: a call still blocked after its deadline cannot keep the process from exiting
(``asyncio.run`` waits for the default executor's threads at shutdown, however long they block). And
they wake each other and the loop less often: a thread is woken at the end of the loop iteration
that submitted calls, not in the middle of it, and one ``call_soon_threadsafe`` hands back every
result that finished since the loop's last wake-up, where the default executor switches threads
both ways for each call. ``benchmarks/rollout_server.py`` cannot show the difference (it would need
the old code); the figures are in ``docs/design.md``.

:class:`ToolsCache` validates the returned list into tool models and keeps the last one: agents
usually return an equal list every time, so an init validates nothing, and the finished-rollout
records that keep the tools for duplicate inits share one list.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema
from osmosis_ai.rollout.server.isolation import AgentRaised, contain

if TYPE_CHECKING:
    from osmosis_ai.rollout.core.schemas import RolloutRequest

logger = logging.getLogger(__name__)

_TOOLS = TypeAdapter(list[OpenAIFunctionToolSchema])


class _Call:
    """One synchronous ``get_tools`` call handed to the worker threads."""

    __slots__ = ("argument", "dropped", "function", "future", "loop")

    def __init__(self, function: Callable[[Any], Any], argument: Any, loop: asyncio.AbstractEventLoop):
        self.function = function
        self.argument = argument
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.dropped = False  # the caller stopped waiting: skip it if still queued

    def run(self) -> tuple[bool, Any]:
        try:
            return True, self.function(self.argument)
        except Exception as exc:
            return False, exc
        except BaseException as exc:  # SystemExit in a worker thread would end only the thread; keep it
            return False, AgentRaised(exc)


class ToolsThreads:
    """A few daemon threads that run synchronous ``get_tools`` calls and hand results back in batches.

    A thread takes one call at a time, so a call that blocks holds only its own thread; a call waits
    only when every thread is busy. Both directions are batched: the calls one loop iteration submits
    wake one idle thread, once, at the end of the iteration, and results reach each loop through one
    ``call_soon_threadsafe`` for all that finished since its last wake-up.
    """

    def __init__(self, max_threads: int | None = None, idle_seconds: float = 60.0) -> None:
        self.max_threads = max_threads or min(32, (os.cpu_count() or 1) + 4)
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[_Call] = deque()
        self._threads = 0
        self._idle = 0
        self._done: dict[asyncio.AbstractEventLoop, list[tuple[_Call, bool, Any]]] = {}
        self._waking: set[asyncio.AbstractEventLoop] = set()

    def submit(self, function: Callable[[Any], Any], argument: Any) -> _Call:
        call = _Call(function, argument, asyncio.get_running_loop())
        with self._lock:
            self._queue.append(call)
            if self._idle:
                # Waking a thread costs a context switch: one wake-up takes every call this loop
                # iteration submits.
                if call.loop not in self._waking:
                    self._waking.add(call.loop)
                    call.loop.call_soon(self._wake_one, call.loop)
            elif self._threads < self.max_threads:
                self._start_thread()
        return call

    def _wake_one(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._waking.discard(loop)
            if self._queue:
                self._hand_on()

    def _serve(self) -> None:
        while (call := self._next()) is not None:
            if not call.dropped:
                ok, value = call.run()
                self._finish(call, ok, value)
                del value
            del call  # a thread waiting for work must not keep the last call's request alive

    def _next(self) -> _Call | None:
        """The next queued call; ``None`` when this thread has been idle for ``idle_seconds`` and ends."""
        with self._lock:
            while not self._queue:
                self._idle += 1
                woken = self._wake.wait(self.idle_seconds)
                self._idle -= 1
                if not woken and not self._queue:
                    self._threads -= 1
                    return None
            call = self._queue.popleft()
            if self._queue:  # more calls wait behind this one, which may block
                self._hand_on()
            return call

    def _hand_on(self) -> None:
        """Get another thread onto the queue: an idle one, else a new one while below the limit.

        With the lock held. Past the limit the queue waits for a busy thread to come back.
        """
        if self._idle:
            self._wake.notify()
        elif self._threads < self.max_threads:
            self._start_thread()

    def _start_thread(self) -> None:  # with the lock held
        self._threads += 1
        threading.Thread(target=self._serve, name="osmosis-get-tools", daemon=True).start()

    def _finish(self, call: _Call, ok: bool, value: Any) -> None:
        loop = call.loop
        with self._lock:
            batch = self._done.get(loop)
            if batch is not None:  # a wake-up is already on its way and takes this result too
                batch.append((call, ok, value))
                return
            self._done[loop] = [(call, ok, value)]
        self._post(loop)

    def _post(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.call_soon_threadsafe(self._deliver, loop)
        except RuntimeError:  # the loop is closed: nobody waits for these results any more
            with self._lock:
                self._done.pop(loop, None)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch = self._done.pop(loop, [])
        for call, ok, value in batch:
            future = call.future
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_THREADS = ToolsThreads()


class GetToolsCaller:
    """Calls one agent's ``get_tools`` without letting it stall the event loop (see the module docstring)."""

    def __init__(self, get_tools: Callable[[RolloutRequest], Any], timeout: float | None) -> None:
        self._get_tools = get_tools
        self._timeout = timeout
        self._is_async = inspect.iscoroutinefunction(get_tools)

    async def __call__(self, request: RolloutRequest) -> Any:
        if self._is_async:
            return await self._bounded(contain(lambda: self._get_tools(request)))
        call = _THREADS.submit(self._get_tools, request)
        timeout = self._timeout
        timer = None if timeout is None else call.loop.call_later(timeout, self._expire, call.future)
        try:
            return await call.future
        finally:
            call.dropped = True
            if timer is not None:
                timer.cancel()

    def _expire(self, future: asyncio.Future[Any]) -> None:
        if not future.done():
            future.set_exception(self._timed_out())

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(f"get_tools did not return within {self._timeout:g} s")

    async def _bounded(self, awaitable: Any) -> Any:
        try:
            return await asyncio.wait_for(awaitable, self._timeout)
        except asyncio.TimeoutError:
            raise self._timed_out() from None


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
