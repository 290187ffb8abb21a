"""Coroutines on an event loop of their own: :func:`run_sync` for synchronous code, :func:`synchronous`
to make a coroutine function's blocking twin, :class:`Apart` for a loop that must keep time while
code it does not trust runs, and :func:`on_loop` for that code to call back into the loop it left.

A coroutine always runs on a fresh event loop in a helper thread, and the caller waits for it. So a
call works the same from plain code and from a thread that runs an event loop (async code, Jupyter:
that loop is blocked meanwhile, as by any blocking call), loops are never nested, and the calling
thread's event loop setting is left alone (``asyncio.run`` in the calling thread would clear it, and
a 0.2-era script's later ``asyncio.get_event_loop()`` would fail). Tasks the coroutine leaves behind
are cancelled, and the SDK's connection pools closed, with that loop before the call returns.

:class:`Apart` is the same helper thread awaited from an event loop instead of blocking it: the
awaiting loop never runs the coroutine's code, so a coroutine that blocks its own loop (``time.sleep``,
a busy loop) or ignores its cancellation holds only its thread, and the awaiting loop can stop
waiting for it at a deadline. A thread cannot be killed: one whose coroutine never ends is left to
itself (it is a daemon, so it does not keep the process alive). A C call that holds the GIL stops
every thread, this one's awaiting loop included; only a process of its own escapes that.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
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
        self.on_done: Callable[[], None] | None = None  # called in the helper thread once it has ended
        self.kept: list[Any] = []  # coroutines that ignored their closing (see run)
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
        if self.kept:
            # Collected, a coroutine that ignored GeneratorExit is closed again and ignores it again:
            # a traceback at some later time, or, once its loop is gone, a loop for ever at the
            # interpreter's exit. Parked on this daemon thread, whose frames are never collected,
            # they never are; the thread never ends, as the coroutine asked.
            threading.Event().wait()
        self.done.set()
        if self.on_done is not None:
            self.on_done()

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

    def close(self) -> None:
        """Close the coroutine where it waits, on its own loop (``GeneratorExit``, which ``except
        CancelledError`` and ``except Exception`` do not catch), then cancel it."""
        with self._lock:
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed: nothing left to close
                loop.call_soon_threadsafe(self._close_now, task)

    def _close_now(self, task: asyncio.Task[Any]) -> None:
        chain: list[Any] = []
        awaiting: Any = task.get_coro()
        while inspect.iscoroutine(awaiting):  # the awaits down to where it waits
            chain.append(awaiting)
            awaiting = awaiting.cr_await
        # A coroutine that ignores GeneratorExit too raises RuntimeError; one that turns it into
        # another error has ended all the same.
        with contextlib.suppress(Exception):
            chain[0].close()
        self.kept = [coroutine for coroutine in chain if coroutine.cr_frame is not None]
        task.cancel()


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


class Apart(Generic[T]):
    """``coroutine`` on a fresh event loop in a daemon thread named ``name``, awaited from the running
    loop (see the module docstring). Created in a task, it carries that task's context variables."""

    def __init__(self, coroutine: Coroutine[Any, Any, T], *, name: str = "osmosis-apart") -> None:
        loop = asyncio.get_running_loop()
        self._call = _Call(coroutine)
        self._finished: asyncio.Future[None] = loop.create_future()

        def tell() -> None:
            with contextlib.suppress(RuntimeError):  # the awaiting loop closed: nobody waits any more
                loop.call_soon_threadsafe(_finish, self._finished)

        self._call.on_done = tell
        try:
            threading.Thread(target=self._call.run, name=name, daemon=True).start()
        except BaseException:
            self._call.cancel()
            raise

    @property
    def done(self) -> bool:
        """Whether the coroutine and its loop have ended (safe from any thread)."""
        return self._call.done.is_set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Whether it ends within ``timeout`` seconds (``None``: wait until it does)."""
        await asyncio.wait((self._finished,), timeout=timeout)
        return self.done

    def result(self) -> T:
        """The coroutine's result, or its exception raised; only once :attr:`done`."""
        if self._call.error is not None:
            raise self._call.error
        return self._call.value[0]

    def cancel(self) -> None:
        """Cancel the coroutine on its loop (heard when that loop next runs)."""
        self._call.cancel()

    def close(self) -> None:
        """Close the coroutine on its loop, for one that ignored its cancellation (see :meth:`_Call.close`)."""
        self._call.close()


def _finish(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def on_loop(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    """Await ``coroutine`` run on ``loop``, another thread's, with the caller's context variables;
    cancelling the caller cancels it there."""
    if loop is asyncio.get_running_loop():
        return await coroutine
    try:
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    except RuntimeError:  # that loop has closed
        coroutine.close()
        raise
    return await asyncio.wrap_future(future)


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
