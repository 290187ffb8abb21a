"""Synchronous code calling the SDK's coroutines: :func:`run_sync`, and :func:`synchronous` to make a
coroutine function's blocking twin.

A coroutine always runs on a fresh event loop in a helper thread, and the caller waits for it. So a
call works the same from plain code and from a thread that runs an event loop (async code, Jupyter:
that loop is blocked meanwhile, as by any blocking call), loops are never nested, and the calling
thread's event loop setting is left alone (``asyncio.run`` in the calling thread would clear it, and
a 0.2-era script's later ``asyncio.get_event_loop()`` would fail). Tasks the coroutine leaves behind
are cancelled, and the SDK's connection pools closed, with that loop before the call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class _Call(Generic[T]):
    """One coroutine on its own loop in a helper thread, cancellable from the waiting thread."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._context = contextvars.copy_context()  # the caller's context variables reach the coroutine
        self._lock = threading.Lock()
        self._entered = self._cancelled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self.value: list[T] = []  # the result, once there is one
        self.error: BaseException | None = None
        # Waited on rather than Thread.join: a join interrupted by Ctrl-C can mark the thread finished
        # while it still runs (seen on CPython 3.11), and the wait for its cleanup would be skipped.
        self.done = threading.Event()

    def run(self) -> None:
        with self._lock:
            self._entered = True
        try:
            self.value.append(self._context.run(asyncio.run, self._main()))
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    async def _main(self) -> T:
        with self._lock:
            if self._cancelled:
                self._coroutine.close()
                raise asyncio.CancelledError
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        return await self._coroutine

    def cancel(self) -> bool:
        """Stop the coroutine; whether the helper thread has it (then wait for :attr:`done`)."""
        with self._lock:
            self._cancelled = True
            if not self._entered:  # the thread never started, or has not reached it: it never will
                self._coroutine.close()
                return False
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed: nothing left to cancel
                loop.call_soon_threadsafe(task.cancel)
        return True


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion and return its result or raise its exception.

    Ctrl-C while waiting cancels the coroutine, waits for it to clean up (worker processes ended,
    connections closed), and raises ``KeyboardInterrupt``; a second Ctrl-C stops waiting.
    """
    call = _Call(coroutine)
    try:
        threading.Thread(target=call.run, name="osmosis-sync", daemon=True).start()
        call.done.wait()
    except BaseException:  # Ctrl-C, or no thread to be had
        if call.cancel():
            call.done.wait()
        raise
    if call.error is not None:
        raise call.error
    return call.value[0]


def synchronous(function: Callable[P, Coroutine[Any, Any, T]], name: str, doc: str) -> Callable[P, T]:
    """The blocking twin of the coroutine function ``function``, called ``name``.

    It takes exactly ``function``'s parameters (``inspect.signature`` and type checkers see them) and
    runs each call with :func:`run_sync`, so the pair cannot drift apart.
    """

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(function(*args, **kwargs))

    call.__name__ = name
    call.__qualname__ = name
    call.__doc__ = doc
    return call
