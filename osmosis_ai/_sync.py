"""Coroutines on an event loop of their own: :func:`run_sync` for synchronous code, :func:`synchronous`
to make a coroutine function's blocking twin, :class:`Apart` for a loop that must keep time while
code it does not trust runs, and :func:`on_loop` for that code to call back into the loop it left.

A coroutine always runs on a fresh event loop in a helper thread, and the caller waits for it. So a
call works the same from plain code and from a thread that runs an event loop (async code, Jupyter:
that loop is blocked meanwhile, as by any blocking call), loops are never nested, and the calling
thread's event loop setting is left alone (``asyncio.run`` in the calling thread would clear it, and
a 0.2-era script's later ``asyncio.get_event_loop()`` would fail). Tasks the coroutine leaves behind
are cancelled, and the SDK's connection pools closed, with that loop before the call returns.

:class:`Apart` runs a coroutine on another thread's event loop and is awaited from the running loop
instead of blocking it: the awaiting loop never runs the coroutine's code, so a coroutine that blocks
its own loop (``time.sleep``, a busy loop) or ignores its cancellation holds only its thread, and the
awaiting loop can stop waiting for it at a deadline. Those threads are daemons, each running one
loop for one coroutine at a time, and reused (a thread and a loop per coroutine would cost more than
a model call's own work): a loop is taken again only if the coroutine left no task running on it,
else the leftovers are cancelled and that loop ends with them, as ``asyncio.run`` would end it. A
thread cannot be killed: one whose coroutine never ends is left to itself, and does not keep the
process alive. A C call that holds the GIL stops every thread, the awaiting loop's included; only a
process of its own escapes that.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import os
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


class _LoopThread:
    """A daemon thread running an event loop, for one coroutine at a time."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.generation = 0  # counts the times it was given back, so a stale idle timer does nothing
        self.kept: list[Any] = []  # coroutines that ignored their closing (see Apart._close_now)
        # The tasks on this loop that have not ended (asyncio.all_tasks would look at every loop's).
        self.tasks: set[asyncio.Future[Any]] = set()
        self.loop.set_task_factory(self._task)
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _task(self, loop: asyncio.AbstractEventLoop, coroutine: Any, **options: Any) -> asyncio.Future[Any]:
        task = asyncio.Task(coroutine, loop=loop, **options)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())  # the SDK's pools on it close
        self.loop.close()


class _LoopThreads:
    """The idle :class:`_LoopThread` s, each ending after ``IDLE_SECONDS`` unused."""

    IDLE_SECONDS = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_LoopThread] = []

    def take(self, name: str) -> _LoopThread:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _LoopThread(name)

    def give_back(self, worker: _LoopThread) -> None:
        """From ``worker``'s own loop, once its coroutine left nothing behind."""
        with self._lock:
            worker.generation += 1
            self._idle.append(worker)
        worker.loop.call_later(self.IDLE_SECONDS, self._retire, worker, worker.generation)

    def _retire(self, worker: _LoopThread, generation: int) -> None:
        with self._lock:
            if worker.generation != generation or worker not in self._idle:
                return  # taken again since
            self._idle.remove(worker)
        worker.loop.stop()

    def forget(self) -> None:
        """In a forked child: the threads of these loops stayed in the parent."""
        self._lock = threading.Lock()
        self._idle = []


_loop_threads = _LoopThreads()
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_loop_threads.forget)


class Apart(Generic[T]):
    """``coroutine`` on another thread's event loop, awaited from the running loop (see the module
    docstring). Created in a task, it carries that task's context variables."""

    def __init__(self, coroutine: Coroutine[Any, Any, T], *, name: str = "osmosis-apart") -> None:
        home = asyncio.get_running_loop()
        self._finished: asyncio.Future[None] = home.create_future()
        self._home, self._coroutine = home, coroutine
        self._lock = threading.Lock()
        self._task: asyncio.Task[T] | None = None
        self._cancelled = False
        self._done = threading.Event()
        self._value: list[T] = []
        self._error: BaseException | None = None
        self._worker = _loop_threads.take(name)
        self._worker.loop.call_soon_threadsafe(self._start, context=contextvars.copy_context())

    @property
    def done(self) -> bool:
        """Whether the coroutine has ended (safe from any thread)."""
        return self._done.is_set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Whether it ends within ``timeout`` seconds (``None``: wait until it does)."""
        await asyncio.wait((self._finished,), timeout=timeout)
        return self.done

    def result(self) -> T:
        """The coroutine's result, or its exception raised; only once :attr:`done`."""
        if self._error is not None:
            raise self._error
        return self._value[0]

    def cancel(self) -> None:
        """Cancel the coroutine on its loop (heard when that loop next runs)."""
        with self._lock:
            self._cancelled = True
            task = self._task
        if task is not None:
            self._worker.loop.call_soon_threadsafe(task.cancel)

    def close(self) -> None:
        """Close the coroutine where it waits, on its loop (``GeneratorExit``, which ``except
        CancelledError`` and ``except Exception`` do not catch), then cancel it: for one that
        ignored its cancellation."""
        with self._lock:
            task = self._task
        if task is not None:
            self._worker.loop.call_soon_threadsafe(self._close_now, task)

    # -- on the coroutine's own loop ---------------------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._cancelled:  # cancelled before it began: it never will
                self._coroutine.close()
                self._error = asyncio.CancelledError()
                self._end()
                return
            self._task = self._worker.loop.create_task(self._coroutine)
        self._task.add_done_callback(self._ended)

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
        self._worker.kept = [coroutine for coroutine in chain if coroutine.cr_frame is not None]
        task.cancel()

    def _ended(self, task: asyncio.Task[T]) -> None:
        if self._worker.kept:
            # It ignored its closing: never done, and its loop runs on, never reused, holding the
            # coroutines from this daemon thread, whose frames are never collected. Collected, such a
            # coroutine is closed again and ignores it again: a traceback some time later, or, once
            # its loop is gone, a loop for ever at the interpreter's exit.
            return
        if task.cancelled():
            self._error = asyncio.CancelledError()
        elif task.exception() is not None:
            self._error = task.exception()
        else:
            self._value.append(task.result())
        self._end()

    def _end(self) -> None:
        self._done.set()
        with contextlib.suppress(RuntimeError):  # the awaiting loop closed: nobody waits any more
            self._home.call_soon_threadsafe(_finish, self._finished)
        left = [task for task in self._worker.tasks if not task.done()]
        if not left:
            _loop_threads.give_back(self._worker)
            return
        for task in left:
            task.cancel()
        self._worker.loop.create_task(_stop_after(left))


async def _stop_after(tasks: list[asyncio.Future[Any]]) -> None:
    await asyncio.wait(tasks)
    asyncio.get_running_loop().stop()


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
