"""Running a command's coroutine so that Ctrl-C always ends it, soon.

The first Ctrl-C cancels the command: the run stops taking items, the ones in flight are cancelled,
and whatever was committed to a journal stays committed (a commit is one SQLite transaction, which
a cancellation or a crash either completes or leaves out). User code can keep that from finishing —
a synchronous call that blocks the event loop, an agent that swallows its cancellation — so the
process then ends on its own ``GRACE_SECONDS`` later, and a second Ctrl-C ends it at once. Either
way the exit status is 130, as for any command stopped by Ctrl-C.

A C call that holds the GIL (in an agent, or in a reward run in-process) keeps every Python thread,
and so every Python signal handler, from running. The kernel still ends the process then: each
handler is installed so that its signal, once received, reverts to the system's default action
until Python has handled it (``SA_RESETHAND``, on Linux), so the second Ctrl-C that arrives while
Python cannot run terminates the process (a shell reports 130). A hold that starts after Python has
handled the first one is ended ``GRACE_SECONDS`` later by faulthandler's watchdog, a C thread that
needs no GIL (exit status 1: no Python code can run to say more).

SIGTERM and SIGHUP (a supervisor stopping the command, a closed terminal) follow the same rule, so
the command ends its worker processes and keeps its journal on them too; the exit status is then
128 plus the signal's number (143, 129), as a shell reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import functools
import os
import platform
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that stop a command by the rule of the module docstring."""
GRACE_SECONDS = 5.0
HINT_SECONDS = 1.0  # a stop that takes longer than this says so, and how to skip it
INTERRUPTED = 130
_SA_RESETHAND = 0x80000000


@functools.cache
def _devnull() -> Any:
    return open(os.devnull, "w")  # faulthandler keeps writing to it: never closed


def _hint() -> None:
    with contextlib.suppress(OSError, ValueError):
        print("Interrupted: still stopping... (Ctrl-C again to quit at once)", file=sys.stderr, flush=True)


def _status(signum: int) -> int:
    return INTERRUPTED if signum == signal.SIGINT else 128 + signum


def _exit_now(signum: int = signal.SIGINT) -> NoReturn:
    with contextlib.suppress(OSError, ValueError):
        print("Interrupted: stopped at once; what was committed to a journal is kept.", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: nothing to say there
            stream.flush()
    os._exit(_status(signum))


def _once_then_default(signum: int) -> None:
    """Make the kernel revert ``signum`` to its default action once delivered (see the module
    docstring). Linux's ``struct sigaction`` on x86-64 and arm64 only; elsewhere nothing changes."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        return
    import ctypes

    class Action(ctypes.Structure):
        _fields_ = [
            ("handler", ctypes.c_void_p),
            ("mask", ctypes.c_ubyte * 128),
            ("flags", ctypes.c_uint),
            ("restorer", ctypes.c_void_p),
        ]

    libc = ctypes.CDLL(None, use_errno=True)
    action = Action()
    if libc.sigaction(signum, None, ctypes.byref(action)) == 0:
        action.flags |= _SA_RESETHAND
        libc.sigaction(signum, ctypes.byref(action), None)


def run_command(main: Callable[[], Coroutine[Any, Any, int]], *, on_interrupt: Callable[[], int]) -> int:
    """``asyncio.run(main())`` with the Ctrl-C rule of the module docstring; ``on_interrupt()`` says
    what was kept (on stderr) and returns the exit status, once the cancelled command has unwound."""
    state: dict[str, Any] = {}
    timers: list[threading.Timer] = []

    async def wrapped() -> int:
        state["loop"], state["task"] = asyncio.get_running_loop(), asyncio.current_task()
        return await main()

    def on_signal(signum: int, frame: object) -> None:
        loop, task = state.get("loop"), state.get("task")
        if state.get("interrupted") or loop is None or task is None or loop.is_closed():
            _exit_now(signum)
        state["interrupted"] = signum
        signal.signal(signum, on_signal)  # the next one is Python's again while Python can run
        _once_then_default(signum)
        faulthandler.dump_traceback_later(GRACE_SECONDS + HINT_SECONDS, exit=True, file=_devnull())
        loop.call_soon_threadsafe(task.cancel)
        for delay, action in ((HINT_SECONDS, _hint), (GRACE_SECONDS, lambda: _exit_now(signum))):
            timer = threading.Timer(delay, action)
            timer.daemon = True
            timer.start()
            timers.append(timer)

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return asyncio.run(wrapped())
    previous = {signum: signal.signal(signum, on_signal) for signum in STOPPING}
    for signum in STOPPING:
        _once_then_default(signum)
    try:
        return asyncio.run(wrapped())
    except (asyncio.CancelledError, KeyboardInterrupt):
        signum = state.get("interrupted")
        if not signum:
            raise
        try:
            status = on_interrupt()
        except OSError:  # the terminal is gone (SIGHUP): nothing to say there
            status = INTERRUPTED
        return _status(signum) if status == INTERRUPTED else status
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for timer in timers:  # the command unwound in time: nothing left to force
            timer.cancel()
        if state.get("interrupted"):
            faulthandler.cancel_dump_traceback_later()
