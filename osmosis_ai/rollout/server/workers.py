"""``serve_agent_loop(workers=N)``: N processes serving one port, supervised by the calling process.

The calling process binds the port once, then starts N workers with ``spawn`` (the app holds an
event loop, threads and a connection pool, which ``fork`` would copy half-alive); each receives the
listening socket and runs its own app and event loop under :func:`~osmosis_ai.rollout.server.runner.run_app`
(the kernel hands each new connection to one of them). The workers share:

* the dedupe state: an SQLite file beside the outbox (or the ``state`` the config names, e.g.
  Redis), so a duplicate init that lands on another worker runs nothing (state_shared.py);
* the figures of :class:`WorkerSlot`, shared memory from which ``/health`` adds up all workers.

Each worker keeps its own outbox file (worker 0 the server's, worker *i* ``<outbox>.worker-<i>.sqlite3``): a worker that dies is
started again on the same index, and so on the same file, and re-sends what it left; its running
rollouts have no result, so its claims are dropped at once and a repeated init runs them afresh.
The files of indexes an earlier run had and this one does not (fewer workers) are emptied into
worker 0's before any worker starts (:func:`adopt_left_outboxes`).

Signals: the workers are in their own process group, so a terminal's Ctrl-C reaches the supervisor
only; the first SIGINT or SIGTERM is passed on to every worker as SIGTERM (each drains as one
server does), a second SIGINT as SIGINT (uvicorn's force exit). A worker whose supervisor is gone
stops itself.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from osmosis_ai._deadline import Deadline
from osmosis_ai.rollout.server.errors import STARTUP_FAILURE_STATUS, ServeError, ServerStartError

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from osmosis_ai.rollout.server.executor import RolloutExecutor
    from osmosis_ai.rollout.server.state import AppState
    from osmosis_ai.rollout.server.state_sqlite import SqliteState

logger = logging.getLogger(__name__)

FIGURES = ("pid", "active_rollouts", "completed_rollouts", "running_rollouts", "queued_rollouts",
           "pending_deliveries")  # fmt: skip
_RESTART_BACKOFF_SECONDS = (0.0, 0.5, 1.0, 2.0, 5.0)
_STABLE_SECONDS = 10.0  # a worker that lived this long restarts without delay
_STOP_MARGIN_SECONDS = 15.0  # beyond a worker's own drain budget, before it is killed


class WorkerSlot:
    """One worker's row of the figures every worker can read (shared memory the supervisor made)."""

    def __init__(self, figures: Any, index: int, count: int) -> None:
        self.figures = figures
        self.index = index
        self.count = count

    def publish(self, state: AppState, executor: RolloutExecutor) -> None:
        values = (os.getpid(), state.active_count, state.completed_count, state.running,
                  state.queued_count, executor.pending_deliveries)  # fmt: skip
        start = self.index * len(FIGURES)
        self.figures[start : start + len(FIGURES)] = values

    def totals(self) -> dict[str, int]:
        """``count`` workers, ``alive`` of them reporting, and each figure summed over those."""
        width = len(FIGURES)
        rows = [self.figures[i * width : (i + 1) * width] for i in range(self.count)]
        alive = [row for row in rows if row[0]]
        totals = {"count": self.count, "alive": len(alive)}
        for column, name in enumerate(FIGURES[1:], start=1):
            totals[name] = sum(row[column] for row in alive)
        return totals


def shared_figures(count: int) -> Any:
    """The shared memory of ``count`` :class:`WorkerSlot` rows (zeroed)."""
    return multiprocessing.get_context("spawn").RawArray("q", count * len(FIGURES))


def worker_outbox(path: str, index: int) -> str:
    """The outbox file of worker ``index`` for the server's outbox ``path``: worker 0 keeps ``path``
    itself, so what one process left is re-sent by N and back (``:memory:`` stays)."""
    if path == ":memory:" or index == 0:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.worker-{index}{ext or '.sqlite3'}"


def adopt_left_outboxes(path: str, count: int) -> int:
    """Move the unacknowledged callbacks of the worker outboxes of ``path`` with an index ``count`` or
    above (an earlier run had more workers) into ``path`` itself, worker 0's, and remove those files;
    returns how many callbacks were moved.

    Each row is committed to ``path`` before its file is removed, so a crash in between sends it
    twice at worst (delivery is at-least-once); of two rows of one key the newer is kept. A file
    that cannot be read is left where it is, logged.
    """
    import re
    import sqlite3
    from glob import escape, glob

    from osmosis_ai.rollout.server.outbox import Outbox

    if path == ":memory:":
        return 0
    root, ext = os.path.splitext(path)
    ext = ext or ".sqlite3"
    pattern = re.compile(re.escape(root) + r"\.worker-(\d+)" + re.escape(ext))
    left = sorted(
        (int(match.group(1)), found)
        for found in glob(f"{escape(root)}.worker-*{escape(ext)}")
        if (match := pattern.fullmatch(found)) and int(match.group(1)) >= count
    )
    if not left:
        return 0
    moved = 0
    target = Outbox(path)
    try:
        for index, found in left:
            try:
                source = Outbox(found)
                try:
                    rows = source.all()
                finally:
                    source.close()
            except (OSError, sqlite3.Error) as exc:
                logger.error("cannot read the outbox %s left by worker %d: %s; it is kept", found, index, exc)
                continue
            for delivery in rows:
                current = target.get(delivery.key)
                if current is None or current.created < delivery.created:
                    target.put(delivery)
            for leftover in (found, f"{found}-wal", f"{found}-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(leftover)
            moved += len(rows)
            if rows:
                logger.info(
                    "outbox: took over %d unacknowledged callbacks of worker %d (%s), which this run "
                    "does not have", len(rows), index, found,
                )  # fmt: skip
    finally:
        target.close()
    return moved


def state_beside(outbox: str) -> str:
    """The workers' shared SQLite state for the server's outbox file."""
    root, ext = os.path.splitext(outbox)
    return f"{root}.state{ext or '.sqlite3'}"


PROMETHEUS_PREFIX = "osmosis-prometheus-"


def sweep_stale(prefix: str) -> None:
    """Remove the temporary directories named ``<prefix><pid>-...`` whose process is gone: a
    supervisor killed with SIGKILL could not remove its own."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        pid_text = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        except PermissionError:  # another user's live process
            continue


@contextlib.contextmanager
def prometheus_multiprocess() -> Iterator[Callable[[int], None]]:
    """Prometheus' multiprocess mode for the workers, when ``prometheus_client`` is installed.

    ``PROMETHEUS_MULTIPROC_DIR`` is set to a fresh private directory before any worker starts (the
    workers inherit it, so each writes its own value files there and ``/metrics`` adds them up);
    yields the function to call with the pid of each worker that ended. Restored and removed on exit.
    """
    if find_spec("prometheus_client") is None:
        yield lambda pid: None
        return
    sweep_stale(PROMETHEUS_PREFIX)
    directory = tempfile.mkdtemp(prefix=f"{PROMETHEUS_PREFIX}{os.getpid()}-")
    previous = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory

    def worker_ended(pid: int) -> None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, directory)

    try:
        yield worker_ended
    finally:
        if previous is None:
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        else:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = previous
        shutil.rmtree(directory, ignore_errors=True)


WorkerTarget = Callable[..., None]


class Supervisor:
    """Starts ``count`` workers running ``target(sock, index, figures)``, restarts those that die,
    and stops them all on SIGINT/SIGTERM (module docstring). :meth:`run` blocks until they ended.

    ``stop_seconds``: how long a stopping worker may take (its drain) before it is killed.
    ``state``: the host's shared SQLite state, told at once when a worker dies.
    """

    def __init__(
        self,
        target: WorkerTarget,
        sock: socket.socket,
        count: int,
        stop_seconds: float,
        state: SqliteState | None = None,
    ) -> None:
        self.target = target
        self.sock = sock
        self.count = count
        self.stop_seconds = stop_seconds + _STOP_MARGIN_SECONDS
        self.state = state
        self.figures = shared_figures(count)
        self._context = multiprocessing.get_context("spawn")
        self._workers: list[BaseProcess | None] = [None] * count
        self._started_at = [0.0] * count
        self._starts = [0] * count
        self._restarts = [0] * count
        self._restart_at: list[float | None] = [None] * count
        self._signals: list[int] = []
        self.stopped_by: int | None = None
        """The signal that stopped the workers (``None`` while serving, or when a worker failed to start)."""
        self._stopping: Deadline | None = None  # set once every worker is asked to stop
        self._forced = False

    def run(self) -> None:
        """Serve until a signal stops every worker; ``ServeError`` if a worker cannot start at all."""
        self.sock.listen(2048)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            with prometheus_multiprocess() as worker_ended:
                self._worker_ended = worker_ended
                for index in range(self.count):
                    self._start(index)
                failed = self._supervise()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for worker in self._workers:
                if worker is not None and worker.is_alive():
                    worker.kill()
                    worker.join(5)
        if failed is not None:
            raise ServeError(f"worker {failed} exited before it could serve; see its log above")

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals.append(signum)  # acted on by the supervising loop, not inside the handler

    def _start(self, index: int) -> None:
        worker = self._context.Process(
            target=_worker_entry,
            args=(self.target, self.sock, index, self.figures, os.getpid()),
            name=f"osmosis-serve-worker-{index}",
            daemon=False,
        )
        worker.start()
        self._workers[index] = worker
        self._started_at[index] = time.monotonic()
        self._starts[index] += 1
        self._restart_at[index] = None
        logger.info("worker %d started (pid %s)", index, worker.pid)

    def _supervise(self) -> int | None:
        """The supervising loop; the index of a worker that never came up (everything is stopped then)."""
        while True:
            self._handle_signals()
            live = [worker for worker in self._workers if worker is not None]
            if self._stopping is not None and not live:
                return None
            wait([worker.sentinel for worker in live], timeout=0.2)
            now = time.monotonic()
            for index, worker in enumerate(self._workers):
                if worker is not None and not worker.is_alive():
                    if self._ended(index, worker) and self._stopping is None:
                        self._stop()
                        self._wait_all()
                        return index
                elif worker is None and self._stopping is None:
                    restart_at = self._restart_at[index]
                    if restart_at is not None and now >= restart_at:
                        self._start(index)
            if self._stopping is not None and self._stopping.remaining() == 0:
                for worker in self._workers:
                    if worker is not None and worker.is_alive():
                        logger.error("worker pid %s did not stop in time; killing it", worker.pid)
                        worker.kill()

    def _ended(self, index: int, worker: BaseProcess) -> bool:
        """Account for a worker that ended; whether it was its first start and it never served."""
        worker.join()
        pid = worker.pid
        assert pid is not None
        width = len(FIGURES)
        never_served = self.figures[index * width] == 0 and self._starts[index] == 1
        self.figures[index * width : (index + 1) * width] = [0] * width
        self._workers[index] = None
        self._worker_ended(pid)
        if self.state is not None:
            try:
                self.state.forget_process(pid)
            except Exception:  # the state file broke: its claims then lapse after the lease
                logger.exception("cannot drop the claims of worker pid %d", pid)
        if self._stopping is not None:
            return never_served
        lived = time.monotonic() - self._started_at[index]
        self._restarts[index] = 0 if lived > _STABLE_SECONDS else self._restarts[index] + 1
        delay = _RESTART_BACKOFF_SECONDS[min(self._restarts[index], len(_RESTART_BACKOFF_SECONDS) - 1)]
        self._restart_at[index] = time.monotonic() + delay
        logger.error(
            "worker %d (pid %d) exited with status %s; starting it again%s",
            index,
            pid,
            worker.exitcode,
            f" in {delay:g} s" if delay else "",
        )
        return never_served

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.pop(0)
            if self._stopping is None:
                self.stopped_by = signum
                logger.info("stopping %d workers (draining)", self.count)
                self._stop()
            elif signum == signal.SIGINT and not self._forced:
                self._forced = True
                self._send(signal.SIGINT)

    def _stop(self) -> None:
        self._stopping = Deadline.after(self.stop_seconds)
        self._send(signal.SIGTERM)

    def _send(self, signum: int) -> None:
        for worker in self._workers:
            if worker is not None and worker.pid is not None and worker.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signum)

    def _wait_all(self) -> None:
        assert self._stopping is not None
        for index, worker in enumerate(self._workers):
            if worker is not None:
                worker.join(max(self._stopping.remaining(), 0.1))
                if worker.is_alive():
                    worker.kill()
                self._ended(index, worker)


def _worker_entry(target: WorkerTarget, sock: socket.socket, index: int, figures: Any, parent: int) -> None:
    os.setpgrp()  # a terminal's Ctrl-C goes to the supervisor, which passes it on once
    _stop_when_orphaned(parent)
    try:
        target(sock, index, figures)
    except ServerStartError:  # the reason is logged; this process's status tells its supervisor
        sys.exit(STARTUP_FAILURE_STATUS)


def _stop_when_orphaned(parent: int) -> None:
    """SIGTERM this worker once its supervisor is gone (killed), so it drains instead of lingering."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="osmosis-orphan-watch", daemon=True).start()
