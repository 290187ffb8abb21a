"""How the SDK calls user code that may be synchronous or asynchronous.

User code (rewards, eval functions, an agent's ``get_tools`` or ``run``) may block, may never
return, and may raise anything, ``SystemExit`` and ``KeyboardInterrupt`` included. So:

* :func:`is_async_callable` decides once how a callable is called: ``async def`` functions, partials
  of them, decorated ones (``__wrapped__``) and objects whose class defines ``async def __call__``
  are awaited; anything else is synchronous.
* :class:`UserThreads` runs synchronous code, never on the event loop, in daemon threads of its own
  (at most ``max_threads`` at once). Not the loop's default executor: ``asyncio.run`` joins that
  executor's threads at shutdown however long they block, so one call that never returns would
  keep the process from ending after Ctrl-C; a daemon thread does not. A call whose caller stopped
  waiting still holds its thread until it returns, so threads stuck in user code are never
  multiplied by retries.
* :func:`contain` turns a ``BaseException`` that is not an ``Exception`` into :class:`UserCodeRaised`,
  an ordinary exception: asyncio re-raises ``SystemExit`` and ``KeyboardInterrupt`` out of the event
  loop, which would end every other item of the run with the one that raised.
* :func:`call_user` puts the three together: ``await call_user(fn, *args, threads=...)``.
* :func:`call_inline` is the synchronous twin of :func:`contain` for a thread that exists only to run
  user code, with no event loop to protect: a reward worker process's main thread.

Only the standard library is imported here, and ``asyncio`` only inside the functions that need
it: the reward decorators read :func:`is_async_callable` at decoration time.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class UserCodeRaised(Exception):
    """User code raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``, ...)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        self.original = exc


def is_async_callable(func: Callable[..., Any]) -> bool:
    """Whether calling ``func`` returns an awaitable (see the module docstring)."""
    target: Any = func
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return True
    if not inspect.isfunction(target) and not inspect.ismethod(target):
        call = getattr(type(target), "__call__", None)  # noqa: B004 - the class's own method
        if call is not None and inspect.iscoroutinefunction(call):
            return True
    wrapped = getattr(target, "__wrapped__", None)
    return wrapped is not None and wrapped is not target and is_async_callable(wrapped)


def forget_traceback(exc: BaseException) -> None:
    """Drop the frames a handled exception keeps alive.

    A traceback holds every frame of the failed call with its locals, often in a reference cycle
    that only the cyclic collector frees; thousands of failed items would pile up between collections.
    """
    tb = exc.__traceback__
    if tb is not None:
        traceback.clear_frames(tb)
        exc.__traceback__ = None


async def contain(call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()``; a ``BaseException`` it raises (but cancellation) comes back as :class:`UserCodeRaised`."""
    import asyncio

    try:
        return await call()
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise UserCodeRaised(exc) from None


def call_inline(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` on this thread; a ``BaseException`` that is not an ``Exception``
    comes back as :class:`UserCodeRaised`. Only for a thread that runs nothing but user code."""
    try:
        return function(*args, **kwargs)
    except Exception:
        raise
    except BaseException as exc:
        raise UserCodeRaised(exc) from None


QUEUED, RUNNING, DONE, ABANDONED = "queued", "running", "done", "abandoned"


class _Call:
    __slots__ = ("args", "dropped", "function", "future", "kwargs", "loop", "state")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import asyncio

        self.function, self.args, self.kwargs = function, args, kwargs
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.loop.create_future()
        self.dropped = False  # the caller stopped waiting: skip it if it is still queued
        self.state = QUEUED

    def run(self) -> tuple[bool, Any]:
        try:
            return True, self.function(*self.args, **self.kwargs)
        except Exception as exc:
            return False, exc
        except BaseException as exc:  # SystemExit in a worker thread would end only that thread
            return False, UserCodeRaised(exc)

    def settle(self, ok: bool, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this result any more
            self.loop.call_soon_threadsafe(_settle, self.future, ok, value)


def _settle(future: Any, ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class UserThreads:
    """Daemon threads for synchronous user code, at most ``max_threads`` running at once.

    Calls beyond the limit wait in order for a thread. Their number is bounded by the callers, each
    of which awaits its own call. A thread idle for ``idle_seconds`` ends. A call whose caller stops
    waiting while it runs (a timeout, a cancelled run) gives its place back: a hung function must not
    take a slot from every later call. Its thread ends when the function returns, if it ever does.
    """

    def __init__(self, max_threads: int | None = None, *, name: str = "osmosis-user-code",
                 idle_seconds: float = 30.0) -> None:  # fmt: skip
        if max_threads is not None and max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.max_threads = max_threads or min(32, (os.cpu_count() or 1) + 4)
        self.name = name
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[_Call] = deque()
        self._threads = 0
        self._idle = 0

    async def call(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` in one of the threads; what it raises is raised here."""
        job = _Call(function, args, kwargs)
        with self._lock:
            self._queue.append(job)
            if self._idle:
                self._wake.notify()
            # A notified thread counts as idle until it wakes: compare the waiting calls, not the
            # notifications, with the idle threads, so a burst of calls never waits for one thread.
            if len(self._queue) > self._idle and self._threads < self.max_threads:
                self._threads += 1
                threading.Thread(target=self._serve, name=self.name, daemon=True).start()
        try:
            result: T = await job.future
            return result
        finally:
            with self._lock:
                job.dropped = True
                if job.state == RUNNING:
                    job.state = ABANDONED
                    self._threads -= 1
                    if len(self._queue) > self._idle and self._threads < self.max_threads:
                        self._threads += 1
                        threading.Thread(target=self._serve, name=self.name, daemon=True).start()

    def _serve(self) -> None:
        while (job := self._next()) is not None:
            ok, value = job.run()
            # Marked done before its caller can hear of it, so that the caller's exit never takes a
            # finished call for one it gave up on.
            with self._lock:
                if job.state == ABANDONED:  # its place was given back: this thread is one too many
                    return
                job.state = DONE
            job.settle(ok, value)
            del job, value  # a thread waiting for work must not keep the last call's objects alive

    def _next(self) -> _Call | None:
        with self._lock:
            while True:
                while not self._queue:
                    self._idle += 1
                    woken = self._wake.wait(self.idle_seconds)
                    self._idle -= 1
                    if not woken and not self._queue:
                        self._threads -= 1
                        return None
                job = self._queue.popleft()
                if not job.dropped:  # (a call whose caller stopped waiting before it started is skipped)
                    job.state = RUNNING
                    return job


_default_threads: UserThreads | None = None


def default_threads() -> UserThreads:
    """The process's shared :class:`UserThreads`, for callers that do not size their own."""
    global _default_threads
    if _default_threads is None:
        _default_threads = UserThreads()
    return _default_threads


async def call_user(
    function: Callable[..., Any], /, *args: Any, threads: UserThreads | None = None, **kwargs: Any
) -> Any:
    """Call user code the one way: awaited if async, else in ``threads`` (default: the shared ones).

    A synchronous function that returns an awaitable has it awaited too. ``SystemExit``,
    ``KeyboardInterrupt`` and other non-``Exception`` errors come back as :class:`UserCodeRaised`.
    """
    if is_async_callable(function):
        return await contain(lambda: function(*args, **kwargs))
    value = await (threads or default_threads()).call(function, *args, **kwargs)
    if inspect.isawaitable(value):
        return await contain(lambda: value)
    return value
