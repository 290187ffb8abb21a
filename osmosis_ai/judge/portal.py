"""Run the async judge from synchronous code on one long-lived background event loop.

``evaluate_rubric`` is synchronous (as in osmosis-ai 0.2) but shares the async implementation.
Running each call under a fresh ``asyncio.run`` would rebuild LiteLLM's HTTP clients (they are
cached per event loop) for every judgment; instead every synchronous call is handed to a single
daemon thread that owns an event loop for the life of the process. It also works when the caller
is itself inside a running event loop (the call blocks that loop, as 0.2 did), and in a child
process forked after a call (the child starts its own loop thread).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _forget_loop_after_fork() -> None:
    """A forked child has the parent's loop object but not its thread: start afresh on next use."""
    global _lock, _loop
    _lock = threading.Lock()
    _loop = None


os.register_at_fork(after_in_child=_forget_loop_after_fork)


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="osmosis-judge-loop", daemon=True).start()
            _loop = loop
        return _loop


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the background loop and return its result (or raise its exception)."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _background_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()  # e.g. KeyboardInterrupt while waiting: stop the work too
        raise
