"""The parent's handle on one worker process: started fresh, wired into the event loop, ended for good.

**Spawned, never forked.** A worker is a fresh interpreter (``sys.executable -c`` the worker's
bootstrap): a fork would copy this process's event loop, threads, locks and HTTP pools in whatever
state they are in. It is the ``spawn`` start method without :mod:`multiprocessing`'s re-import of
the main module at every start (that happens only for a reward defined in ``__main__``).

**A session of its own.** Each worker leads its own session and process group, so a Ctrl-C in the
terminal reaches only the parent, which then ends its workers itself, and ending a worker signals
its whole group: child processes the reward started go with it. On Linux the process started is
the worker's keeper (:mod:`osmosis_ai.rewards.runtime.keeper`), which also ends what the reward
started outside the group, when the worker ends, on SIGTERM, and when the parent dies.

**Ending.** :meth:`WorkerProcess.stop` sends SIGTERM to the group and SIGKILL after
:data:`TERM_GRACE`. The exit is noticed without reaping (``waitid`` with ``WNOWAIT``), because the
group may be signalled only while its leader is unreaped (until then its pid, the group's id, cannot
be reused); then the rest of the group gets SIGKILL and the worker is reaped. A worker whose result
pipe closes while it lives on gets the same. Every worker not yet reaped is also in a process-wide
registry, and at interpreter exit whatever is left there is killed and reaped: no process outlives
its parent's interpreter, and none is left a zombie.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osmosis_ai.rewards.runtime import keeper
from osmosis_ai.rewards.runtime.capture import Tail
from osmosis_ai.rewards.runtime.errors import WorkerStartError
from osmosis_ai.rewards.runtime.protocol import (
    FAILED,
    READY,
    RESULTS,
    FrameBuffer,
    FrameError,
    Slots,
    WorkerSettings,
    encode,
)
from osmosis_ai.rewards.runtime.worker import BOOTSTRAP

TERM_GRACE = 0.5
"""Seconds between SIGTERM and SIGKILL."""
EOF_GRACE = 1.0
"""Seconds a worker may live on after closing its result pipe before it is killed."""
OUTPUT_GRACE = 0.5
"""Seconds to wait, once a worker is reaped, for the rest of what it wrote to its descriptors (a
process the reward started outside the worker's group may hold them open for good)."""
POLL_SECONDS = 0.005
"""How often a worker that is ending is checked for its exit."""
KEEPER_GRACE = 2.0
"""Seconds the keepers of the workers being closed have to end their trees and exit."""

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_LIVE: dict[int, tuple[subprocess.Popen[bytes], int]] = {}  # pid -> (process, the pid that started it)


class WorkerProcess:
    """One worker. ``on_results(worker, results)`` gets each results frame; ``on_gone(worker)`` is
    called once, after the worker has exited, every frame it sent has been delivered and it has
    been reaped (``returncode`` is then set; ``slots`` still holds what it was running)."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        on_results: Callable[[WorkerProcess, list[tuple[int, int, Any, float, str]]], None],
        on_gone: Callable[[WorkerProcess], None],
    ) -> None:
        self.settings = settings
        self.slots: Slots | None = None
        # Held weakly: the event loop holds this worker through its pipes, and must not keep the pool
        # alive through it (a pool dropped without closing is then collected, and its workers killed).
        self._on_results = _weak(on_results)
        self._on_gone = _weak(on_gone)
        self.tail = Tail()
        self.process: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.ready = False
        self.stopping = False
        self.garbled = False
        self._stopped_at: float | None = None
        self._eof_at: float | None = None
        self._ready: asyncio.Future[None] | None = None
        self._commands: asyncio.WriteTransport | None = None
        self._transports: list[asyncio.BaseTransport] = []
        self._poll: asyncio.TimerHandle | None = None
        self._output_open = True
        self._reaped_at = 0.0
        self._finished = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(self, timeout: float) -> None:
        """Spawn the worker and wait until it has imported the reward; :class:`WorkerStartError` if not."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self.slots, slots_fd = Slots.create(self.settings.concurrency, self.settings.window)
        command_r, command_w = os.pipe()
        result_r, result_w = os.pipe()
        output_r, output_w = os.pipe()
        passed = (command_r, result_w, slots_fd)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", BOOTSTRAP, _PACKAGE_ROOT, *map(str, passed), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=output_w,
                stderr=output_w,
                pass_fds=passed,
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (command_w, result_r, output_r):
                os.close(fd)
            raise WorkerStartError(f"cannot start a reward worker process: {exc}") from exc
        finally:
            for fd in (command_r, result_w, output_w, slots_fd):
                os.close(fd)
        _LIVE[self.process.pid] = (self.process, os.getpid())
        commands, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(command_w, "wb", 0))
        self._commands = commands
        results, _ = await loop.connect_read_pipe(lambda: _ResultReader(self), os.fdopen(result_r, "rb", 0))
        output, _ = await loop.connect_read_pipe(lambda: _TailReader(self), os.fdopen(output_r, "rb", 0))
        self._transports = [commands, results, output]
        commands.write(encode(self.settings))
        try:
            await asyncio.wait_for(self._ready, timeout)
        except asyncio.TimeoutError:
            self.stop()
            raise WorkerStartError(
                f"a reward worker process did not finish importing {self.settings.name!r} within {timeout:g} s"
            ) from None
        except BaseException:
            self.stop()
            raise
        self.ready = True

    def send(self, data: bytes) -> None:
        if self._commands is not None and not self._commands.is_closing():
            self._commands.write(data)

    def stop(self) -> None:
        """SIGTERM to the worker's group now, SIGKILL after :data:`TERM_GRACE` (see the module docstring)."""
        if self.stopping or self.returncode is not None:
            return
        self.stopping, self.ready = True, False
        self._stopped_at = time.monotonic()
        self._signal_group(signal.SIGTERM)
        self._schedule_poll()

    def check(self) -> None:
        """Notice a worker that exited while something still holds its result pipe open (a process
        it forked): kill its group, which closes the pipe and lets the end be handled as usual."""
        if self._eof_at is None and self.returncode is None and self._exited():
            self._signal_group(signal.SIGKILL)

    def garble(self) -> None:
        """Bytes that are not frames came on the result pipe: something in the worker (its reward)
        wrote there, so nothing more from it is trusted; it is killed now, its end handled as a
        death of its own."""
        if self.garbled or self.returncode is not None:
            return
        self.garbled, self.ready = True, False
        self._kill()
        self._schedule_poll()

    def kill_now(self) -> None:
        """End the worker and its tree (:func:`kill_all`), reap, release everything; for closing the
        pool (blocks briefly)."""
        if self._poll is not None:
            self._poll.cancel()
        kill_all([self])
        self._release()

    def _frame(self, message: Any) -> None:
        if not _well_formed(message):
            raise FrameError("a frame that is not one of the runtime's messages")
        kind = message[0]
        if kind == RESULTS:
            self.tail.clear()  # what came before belongs to samples that are done
            if (on_results := self._on_results()) is not None:
                on_results(self, message[1])
        elif kind == READY and self._ready is not None and not self._ready.done():
            self._ready.set_result(None)
        elif kind == FAILED and self._ready is not None and not self._ready.done():
            detail = f"\n{message[2]}" if message[2] else ""
            self._ready.set_exception(
                WorkerStartError(f"a reward worker process could not load the reward: {message[1]}{detail}")
            )

    def _result_eof(self) -> None:
        self._eof_at = time.monotonic()
        self.ready = False
        self._schedule_poll()  # a start that fails is told once its last words are in (_poll_exit)

    def _schedule_poll(self) -> None:
        if self._poll is None and not self._finished:
            self._poll = asyncio.get_running_loop().call_later(POLL_SECONDS, self._poll_exit)

    def _poll_exit(self) -> None:
        self._poll = None
        if self.process is None or self._finished:
            return
        now = time.monotonic()
        if self.returncode is None:
            if not self._exited():
                stopped_long_ago = self._stopped_at is not None and now - self._stopped_at > TERM_GRACE
                if stopped_long_ago or (self._eof_at is not None and now - self._eof_at > EOF_GRACE):
                    self._kill()
                self._schedule_poll()
                return
            self._signal_group(signal.SIGKILL)  # what the reward started in the group goes too
            if self._eof_at is None:  # its last frames may still be on the way: wait for them
                self._schedule_poll()
                return
            _reap(self.process)
            self.returncode = self.process.returncode
            self._reaped_at = now
        if self._output_open and now - self._reaped_at < OUTPUT_GRACE:
            self._schedule_poll()  # its last words (a fatal signal's traceback) may still be on the way
            return
        self._finished = True
        if self._ready is not None and not self._ready.done():
            said = self.tail.text()
            self._ready.set_exception(
                WorkerStartError(
                    "a reward worker process ended before it was ready" + (f": {said}" if said else "")
                )
            )
        try:
            if (on_gone := self._on_gone()) is not None:
                on_gone(self)
        finally:
            self._release()

    def _exited(self) -> bool:
        assert self.process is not None
        return _has_exited(self.process)

    def _kill(self) -> None:
        """SIGKILL to the keeper's descendants (all found while it lives), then to the group."""
        if self.process is not None and keeper.available() and not self._exited():
            keeper.kill_descendants(self.process.pid)
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, signum: int) -> None:
        if self.process is None or self.process.returncode is not None:
            return  # reaped: its pid, and so the group's id, may belong to someone else by now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def _release(self) -> None:
        for transport in self._transports:
            if transport.is_closing():
                continue
            if isinstance(transport, asyncio.WriteTransport):
                transport.abort()  # nothing buffered for a worker that is gone is worth sending
            else:
                transport.close()
        self._transports = []
        self._commands = None
        if self.slots is not None:
            self.slots.close()


def _well_formed(message: Any) -> bool:
    if not isinstance(message, tuple) or not message:
        return False
    if message[0] == RESULTS:
        return (
            len(message) == 2
            and isinstance(message[1], list)
            and all(isinstance(result, tuple) and len(result) == 5 for result in message[1])
        )
    return message[0] in (READY, FAILED)


def _weak(method: Callable[..., None]) -> Callable[[], Callable[..., None] | None]:
    if hasattr(method, "__self__"):
        return weakref.WeakMethod(method)
    return lambda: method


def describe_exit(returncode: int) -> str:
    """How a worker ended, as words: ``"died of SIGSEGV (segmentation fault)"``, ``"exited with status 3"``."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        number = signal.Signals(-returncode)
    except ValueError:
        return f"died of signal {-returncode}"
    description = signal.strsignal(number) or ""
    if number == signal.SIGKILL:
        description = "killed by the kernel's out-of-memory killer or by another process"
    return f"died of {number.name} ({description.lower()})" if description else f"died of {number.name}"


def _has_exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether ``process`` has exited, without reaping it (its pid stays its own)."""
    if process.returncode is not None:
        return True
    if hasattr(os, "waitid"):
        try:
            return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True
    return process.poll() is not None


def _reap(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # stuck in the kernel; the exit hook tries again
        return
    _LIVE.pop(process.pid, None)


class _ResultReader(asyncio.Protocol):
    def __init__(self, worker: WorkerProcess) -> None:
        self._worker = worker
        self._frames = FrameBuffer()

    def data_received(self, data: bytes) -> None:
        if self._worker.garbled:
            return
        garbled = False
        try:
            frames = self._frames.feed(data)
        except FrameError as exc:  # the frames before the bytes that are not one still count
            frames, garbled = exc.frames, True
        try:
            for frame in frames:
                self._worker._frame(frame)
        except FrameError:
            garbled = True
        if garbled:
            self._worker.garble()

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker._result_eof()


class _TailReader(asyncio.Protocol):
    def __init__(self, worker: WorkerProcess) -> None:
        self._worker = worker

    def data_received(self, data: bytes) -> None:
        self._worker.tail.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker._output_open = False


def kill_all(workers: list[WorkerProcess]) -> None:
    """End and reap every worker of the list that is still running, and what its reward started."""
    live = [w for w in workers if w.process is not None and w.returncode is None]
    _end([w.process for w in live if w.process is not None])
    for worker in live:
        assert worker.process is not None
        worker.returncode = worker.process.returncode


def _end(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each keeper, which kills its tree and exits, then SIGKILL to each group, and reap."""
    live = [process for process in processes if process.returncode is None]
    if keeper.available():
        for process in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + KEEPER_GRACE
        for process in live:
            while not _has_exited(process) and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
            if not _has_exited(process):  # a keeper that does not end: its tree, from here
                keeper.kill_descendants(process.pid)
    for process in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    for process in live:
        _reap(process)


@atexit.register
def _kill_leftovers() -> None:
    _end([process for process, owner in _LIVE.values() if owner == os.getpid()])
