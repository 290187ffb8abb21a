"""Run the async judge from synchronous code on one long-lived background event loop.

``evaluate_rubric`` is synchronous (its public signature) but shares the async implementation.
Running each call under a fresh ``asyncio.run`` would rebuild LiteLLM's HTTP clients (they are
cached per event loop) for every judgment; instead every synchronous call is handed to a single
daemon thread that owns an event loop for the life of the process. It also works when the caller
is itself inside a running event loop (the call blocks that loop, as any synchronous call does),
and in a child process forked after a call (the child starts its own loop thread).

At interpreter exit the loop is wound down (pending tasks cancelled, thread joined) before daemon
threads are frozen: a daemon thread frozen in the middle of an import would otherwise deadlock
LiteLLM's finalizers, which import modules while the interpreter shuts down.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

_SHUTDOWN_SECONDS = 5.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _forget_loop_after_fork() -> None:
    """A forked child has the parent's loop object but not its thread: start afresh on next use."""
    global _lock, _loop, _thread
    _lock = threading.Lock()
    _loop = _thread = None


os.register_at_fork(after_in_child=_forget_loop_after_fork)


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="osmosis-judge-loop", daemon=True)
            thread.start()
            _loop, _thread = loop, thread
        return _loop


async def _cancel_pending() -> None:
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


def shutdown() -> None:
    """Cancel what is still running on the background loop, stop it and join its thread."""
    global _loop, _thread
    with _lock:
        loop, thread, _loop, _thread = _loop, _thread, None, None
    if loop is None or thread is None or loop.is_closed():
        return
    with contextlib.suppress(Exception):  # best effort: a stuck task must not keep the loop alive
        asyncio.run_coroutine_threadsafe(_cancel_pending(), loop).result(timeout=_SHUTDOWN_SECONDS)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=_SHUTDOWN_SECONDS)
    if not thread.is_alive():
        loop.close()


atexit.register(shutdown)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the background loop and return its result (or raise its exception)."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _background_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()  # e.g. KeyboardInterrupt while waiting: stop the work too
        raise


def synchronous(function: Callable[P, Coroutine[Any, Any, T]], name: str, doc: str) -> Callable[P, T]:
    """The blocking twin of the coroutine function ``function``, called ``name``.

    It takes exactly ``function``'s parameters (``inspect.signature`` and type checkers see them) and
    runs each call on the background loop with :func:`run_sync`, so the pair cannot drift apart.
    """

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(function(*args, **kwargs))

    call.__name__ = name
    call.__qualname__ = name
    call.__doc__ = doc
    return call
