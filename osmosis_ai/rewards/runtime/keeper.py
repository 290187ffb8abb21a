"""Every process a reward starts ends with its worker, on Linux even when it left the worker's group.

A reward can start a process in a session of its own (``start_new_session=True``, a daemon's double
fork): signalling the worker's process group does not reach it, and once its parent is gone it
belongs to init. So on Linux the process the parent starts is a **keeper**: before any of the
user's code is imported it forks, the child goes on as the worker, and the keeper stays, running
nothing but this module:

* it is a child subreaper (``PR_SET_CHILD_SUBREAPER``): whatever the reward starts and leaves
  orphaned becomes the keeper's child, however it got out of the group, so every process the reward
  started is a descendant of the keeper for as long as the keeper lives;
* when the worker ends, however it ends, the keeper kills every descendant, reaps them, and ends
  the way the worker ended (the same exit status, or the same signal), so the parent sees the
  worker's own end;
* on SIGTERM, SIGHUP or the death of the parent (``PR_SET_PDEATHSIG``, which it asks for as
  SIGTERM), it does the same at once; the worker has the kernel kill it if the keeper dies.

The parent, which kills a keeper outright only as a last resort, first kills the keeper's
descendants itself (:func:`kill_descendants`): while the keeper lives, they are all found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
ROUNDS = 50
"""Passes :func:`kill_descendants` makes at most (each one kills what the previous pass orphaned)."""


def available() -> bool:
    return sys.platform.startswith("linux")


def prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int) -> list[int]:
    """The living (not zombie) descendants of ``pid``, read from ``/proc``."""
    below: dict[int, list[int]] = {}
    living: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # it ended while we looked
            continue
        child = int(entry.name)
        below.setdefault(int(fields[1]), []).append(child)
        if fields[0] != "Z":
            living.add(child)
    found, stack = [], [pid]
    while stack:
        for child in below.get(stack.pop(), ()):
            stack.append(child)
            if child in living:
                found.append(child)
    return found


def kill_descendants(pid: int) -> dict[int, int]:
    """SIGKILL every descendant of ``pid``, a live subreaper: what one kill orphans is found by the
    next pass. When ``pid`` is this process its children are reaped too: their wait statuses."""
    reaped: dict[int, int] = {}
    for _ in range(ROUNDS):
        found = descendants(pid)
        if pid == os.getpid():
            reaped.update(_reap_all())
        if not found:
            break
        for child in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
    return reaped


def _reap_all() -> dict[int, int]:
    reaped = {}
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                break
            reaped[pid] = status
    return reaped


def split(parent: int, channels: tuple[int, ...]) -> None:
    """Fork the worker off; return in the worker, never in the keeper (see the module docstring)."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
    keeper = os.getpid()
    worker = os.fork()
    if worker == 0:
        prctl(PR_SET_CHILD_SUBREAPER, 0)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != keeper:
            os._exit(1)
        return
    for fd in channels:  # the pipes end when the worker does, not when its keeper does
        os.close(fd)
    os._exit(_keep(worker))


def _keep(worker: int) -> int:
    reaped: dict[int, int] = {}

    def end_now(signum: int, frame: object) -> None:
        reaped.update(kill_descendants(os.getpid()))

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, end_now)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    while worker not in reaped:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # every child was reaped by end_now, the worker among them
            break
        reaped[pid] = status
    reaped.update(kill_descendants(os.getpid()))
    status = reaped.get(worker, 0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
        return 128 + number
    return os.waitstatus_to_exitcode(status)
