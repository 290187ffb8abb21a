"""The warm pool of worker processes behind a runtime with workers: queue, batches, deadlines, deaths.

**Jobs.** A submitted sample becomes a job holding its pickled arguments until it is settled —
exactly once, with a score or a typed failure — or dropped by its caller.

**Batches.** At the end of each loop iteration in which jobs arrive or a worker has room, every
ready worker, the least loaded first, is sent its fair share of the queue (``ceil(waiting / ready
workers)``) up to its window: ``concurrency + 2 * batch`` jobs, where ``batch`` is about
:data:`BATCH_SECONDS` of work by the mean duration measured so far (1 to :data:`MAX_BATCH`). A cheap
reward thus travels in batches of up to 64 with a second batch queued behind, so a worker never
waits for the parent; a slow one goes one or two at a time, so no worker sits on work the others
could be doing, and no sample waits in a busy worker while another one idles.

**Deadlines.** While jobs are out, every :data:`TICK` seconds each worker's slots are read; a sample
running past the timeout (plus :data:`ASYNC_GRACE` for an async reward, which its worker cancels
first) gets its worker stopped (SIGTERM, then SIGKILL), and a replacement is started at once.

**Deaths.** Once a worker is gone (every frame it sent delivered, reaped), its unfinished jobs are
settled: the sample whose deadline stopped it is ``reward_timeout``; if it died on its own, the
sample it was running is ``reward_crash``. When it was running several at once the blame is not
certain (one sample can block or crash the others, whichever started first): they all go back as
suspects, each to run alone, so that only a sample that fails alone fails. A sample the worker finished but had not
reported yet (the shared table records it) is settled with what it returned and never runs again,
whatever became of the worker after. Everything else goes back to the front of the queue in order:
none lost, none counted twice. A worker that dies with nothing running blames no one, but a job
whose worker dies under it :data:`MAX_ORPHANED` times is failed as ``reward_crash``.

**Garbled pipes.** Bytes on a worker's result pipe that are not frames (its reward wrote there) get
the worker killed and replaced at once. The sample that was running then, or had finished since the
last whole frame, is ``reward_crash``; when there are several such samples each runs again alone
first, a finished one included (the one that garbles alone is the one to blame), and the others
go back to the queue.

**Caller deadlines.** A pool whose callers keep each sample's deadline themselves (a rollout
server's grader phase: every rollout its own) has no timeout of its own. Its workers are sent only
what they can start at once, so no sample waits inside a worker behind one that hangs, and a sample
its caller stops waiting for while a worker holds it gets that worker stopped and replaced: the
others it held go back to the queue, as after any stop.

**Failures of the pool itself.** A replacement that cannot start is retried; when no worker is left
and none can be started, the queued jobs and later submissions fail with :class:`WorkerStartError`.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.runtime.errors import RewardInputError, RewardRuntimeError, WorkerStartError
from osmosis_ai.rewards.runtime.process import WorkerProcess, describe_exit, kill_all
from osmosis_ai.rewards.runtime.protocol import (
    CANCELLED,
    ERROR,
    INFRA,
    MEMORY,
    OK,
    TIMEOUT,
    WorkerSettings,
    dumps,
    encode,
)
from osmosis_ai.rewards.runtime.sample import SampleResult
from osmosis_ai.rewards.runtime.stats import RuntimeStats
from osmosis_ai.rewards.runtime.target import RewardTarget, first_line

MAX_BATCH = 64
BATCH_SECONDS = 0.01
TICK = 0.05
ASYNC_GRACE = 0.5
MAX_ORPHANED = 3
START_TIMEOUT = 120.0
RESTART_DELAYS = (0.0, 0.5, 2.0)

Deliver = Callable[[Any], None]
"""Called once with the job's :class:`SampleResult`, or with the exception that ends it."""


class Job:
    __slots__ = ("deliver", "dropped", "index", "orphaned", "payload", "seq", "suspect")

    def __init__(self, seq: int, index: int | None, payload: bytes, deliver: Deliver) -> None:
        self.seq, self.index, self.payload, self.deliver = seq, index, payload, deliver
        self.dropped = self.suspect = False
        self.orphaned = 0


class ProcessPool:
    """Worker processes scoring ``target`` (see the module docstring)."""

    def __init__(
        self,
        target: RewardTarget,
        settings: WorkerSettings,
        *,
        workers: int,
        memory_limit_mb: int | None,
        caller_deadlines: bool = False,
    ) -> None:
        self.target = target
        self.caller_deadlines = caller_deadlines
        self.settings = settings
        self.size = workers
        self.timeout = settings.timeout
        self.memory_limit_mb = memory_limit_mb
        self.stats = RuntimeStats()
        self._seq = itertools.count()
        self._waiting: deque[Job] = deque()
        self._suspects: deque[Job] = deque()
        self._held: dict[WorkerProcess, dict[int, Job]] = {}
        self._culprits: dict[WorkerProcess, dict[int, float]] = {}
        self._solo: set[WorkerProcess] = set()
        self._all: list[WorkerProcess] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._mean: float | None = None
        self._dispatch_soon = False
        self._tick: asyncio.TimerHandle | None = None
        self._failure: BaseException | None = None
        self._closed = False
        self._limit = (self.timeout or 0.0) + (ASYNC_GRACE if target.is_async else 0.0)
        self._finalizer = weakref.finalize(self, kill_all, self._all)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(w.pid for w in self._all if w.pid is not None and w.returncode is None)

    async def start(self) -> None:
        workers = [self._new_worker() for _ in range(self.size)]
        try:
            results = await asyncio.gather(*(w.start(START_TIMEOUT) for w in workers), return_exceptions=True)
            failure = next((r for r in results if isinstance(r, BaseException)), None)
            if failure is not None:
                raise failure
        except BaseException:  # a worker that failed, or the caller cancelled the start: none stays
            for worker in workers:
                worker.kill_now()
                self._forget(worker)
            raise
        for worker in workers:
            self._held[worker] = {}

    def submit(self, args: tuple[Any, ...], index: int | None, deliver: Deliver) -> Job:
        """Queue one sample; :class:`RewardInputError` at once if it cannot be sent to a worker."""
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise RewardRuntimeError("the reward runtime is closed")
        try:
            payload = dumps(args)
        except Exception as exc:
            where = f"row {index}" if index is not None else "the sample"
            raise RewardInputError(
                f"{where} cannot be sent to a worker process: {first_line(exc)}", index=index
            ) from exc
        job = Job(next(self._seq), index, payload, deliver)
        self._waiting.append(job)
        self._schedule_dispatch()
        return job

    def drop(self, job: Job) -> None:
        """The caller stopped waiting: the job is skipped if still queued, its result ignored if not;
        with caller deadlines, a worker that holds it is stopped (see "Caller deadlines")."""
        job.dropped = True
        if not self.caller_deadlines:
            return
        for worker, held in self._held.items():
            if job.seq in held and not worker.stopping:
                self.stats.killed += 1
                worker.stop()
                self._replace()
                return

    async def close(self) -> None:
        self._closed = True
        try:
            for task in self._starting:
                task.cancel()
            if self._starting:
                await asyncio.wait(self._starting)
        finally:
            if self._tick is not None:
                self._tick.cancel()
            for worker in list(self._all):
                worker.kill_now()
            self._finalizer.detach()
            self._fail_waiting(_closed())
            for held in self._held.values():
                for job in held.values():
                    self._settle(job, _closed())
            self._held.clear()

    # -- dispatch ---------------------------------------------------------------------------------

    def _schedule_dispatch(self) -> None:
        if not self._dispatch_soon:
            self._dispatch_soon = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_soon = False
        ready = [w for w in self._held if w.ready and w not in self._solo]
        if not ready:
            return
        for worker in ready:
            if self._suspects and not self._held[worker]:
                self._send(worker, [self._suspects.popleft()])
                self._solo.add(worker)
        # The least loaded first: a sample never queues behind one that may hang while a worker idles.
        ready = sorted((w for w in ready if w not in self._solo), key=lambda w: len(self._held[w]))
        if not ready or not self._waiting:
            return
        batch = self._batch()
        window = self.settings.concurrency + (0 if self.caller_deadlines else 2 * batch)
        share = math.ceil(len(self._waiting) / len(ready))
        for worker in ready:
            room = min(window - len(self._held[worker]), share)
            if room < min(batch, share):
                continue
            jobs: list[Job] = []
            while self._waiting and len(jobs) < room:
                job = self._waiting.popleft()
                if not job.dropped:
                    jobs.append(job)
            if jobs:
                self._send(worker, jobs)

    def _batch(self) -> int:
        if self._mean is None or self.caller_deadlines:
            return 1
        return max(1, min(MAX_BATCH, int(BATCH_SECONDS / max(self._mean, 1e-7))))

    def _send(self, worker: WorkerProcess, jobs: list[Job]) -> None:
        held = self._held[worker]
        for job in jobs:
            held[job.seq] = job
        worker.send(encode([(job.seq, job.payload) for job in jobs]))
        if self._tick is None:
            self._tick = asyncio.get_running_loop().call_later(TICK, self._watch)

    # -- results and deadlines --------------------------------------------------------------------

    def _results(self, worker: WorkerProcess, results: list[tuple[int, int, Any, float, str]]) -> None:
        held = self._held.get(worker)
        if held is None:
            return
        spent = 0.0
        for seq, status, value, duration, output in results:
            job = held.pop(seq, None)
            if job is not None:
                spent += duration
                self._settle(job, self._result(job, status, value, duration, output))
        if results:
            mean = spent / len(results)
            self._mean = mean if self._mean is None else 0.8 * self._mean + 0.2 * mean
        if not held:
            self._solo.discard(worker)
        self._schedule_dispatch()

    def _result(self, job: Job, status: int, value: Any, duration: float, output: str) -> SampleResult:
        if status == OK and self.settings.raw:
            return SampleResult(job.index, Outcome.COMPLETED, None, None, duration, output, value)
        if status == OK:
            return SampleResult(job.index, Outcome.COMPLETED, value, None, duration, output)
        if status == ERROR:
            return SampleResult(job.index, Outcome.REWARD_ERROR, None, value, duration, output)
        if status == INFRA:
            return SampleResult(job.index, Outcome.INFRA_ERROR, None, value, duration, output)
        if status == TIMEOUT:
            how = "it was cancelled" if value == CANCELLED else "it finished late, and its result is not used"
            return SampleResult(
                job.index, Outcome.REWARD_TIMEOUT, None, self._timeout_error(how), duration, output
            )
        assert status == MEMORY
        limit = f" (the worker's memory limit is {self.memory_limit_mb} MB)" if self.memory_limit_mb else ""
        return SampleResult(
            job.index, Outcome.REWARD_CRASH, None, f"{value}: out of memory{limit}", duration, output
        )

    def _timeout_error(self, how: str) -> str:
        return f"the reward ran past its {self.timeout:g} s timeout; {how}"

    def _watch(self) -> None:
        self._tick = None
        now = time.monotonic()
        busy = False
        for worker, held in list(self._held.items()):
            if not worker.ready or worker.slots is None:
                continue
            running = worker.slots.running()
            if not held and not running:
                continue
            busy = True
            worker.check()
            overdue = {seq: now - started for seq, started in running if now - started > self._limit}
            if self.timeout is not None and overdue:  # also a sample already reported that will not stop
                self._culprits[worker] = {seq: spent for seq, spent in overdue.items() if seq in held}
                self.stats.killed += 1
                worker.stop()
                self._replace()
        if busy and not self._closed:
            self._tick = asyncio.get_running_loop().call_later(TICK, self._watch)

    def _gone(self, worker: WorkerProcess) -> None:
        """Settle what ``worker`` left unfinished (see the module docstring)."""
        held = self._held.pop(worker, {})
        culprits = self._culprits.pop(worker, {})
        self._solo.discard(worker)
        self._forget(worker)
        if self._closed:
            for job in held.values():
                self._settle(job, _closed())
            return
        on_its_own = not worker.stopping
        if on_its_own:
            self.stats.died += 1
            self._replace()
        assert worker.slots is not None
        running = [seq for seq, _ in worker.slots.running() if seq in held]
        finished = {seq: record for seq, record in worker.slots.finished().items() if seq in held}
        # Whoever wrote to the result pipe was running then, or finished since the last frame that
        # arrived whole: the one such sample is to blame; several each run again alone first.
        garblers = {seq for seq in held if seq in running or seq in finished} if worker.garbled else set()
        # Samples running side by side in one worker can all look overdue when one of them blocks the
        # rest (an async reward that blocks its event loop, C code that holds the GIL), and the one that
        # blocks may have started last: one overdue alone is to blame, several each run again alone.
        alone = next(iter(culprits)) if len(culprits) == 1 else None
        back: list[Job] = []
        for seq, job in held.items():
            if seq == alone or (seq in culprits and job.suspect):
                error = self._timeout_error("its worker process was killed")
                self._settle(job, SampleResult(job.index, Outcome.REWARD_TIMEOUT, None, error, culprits[seq]))
            elif seq in culprits:
                self._suspect(job)
            elif seq in garblers:
                if len(garblers) == 1 or job.suspect:
                    self._settle(job, self._crash(job, worker, garbled=True))
                else:
                    self._suspect(job)
            elif seq in finished:
                # it returned before its worker went: its result stands, and it never runs again
                self._settle(job, self._result(job, *finished[seq], ""))
            elif not on_its_own or worker.garbled:
                back.append(job)
            elif seq in running:
                if len(running) == 1 or job.suspect:
                    self._settle(job, self._crash(job, worker))
                else:  # one of several that were running did it: each runs alone until it is known
                    self._suspect(job)
            elif not running:  # the worker died between samples: nobody to blame, unless it keeps happening
                job.orphaned += 1
                if job.orphaned >= MAX_ORPHANED:
                    self._settle(job, self._crash(job, worker, waiting=True))
                else:
                    back.append(job)
            else:
                back.append(job)
        self.stats.requeued += len(back)
        self._waiting.extendleft(reversed(back))
        self._schedule_dispatch()

    def _suspect(self, job: Job) -> None:
        job.suspect = True
        self._suspects.append(job)
        self.stats.requeued += 1

    def _crash(
        self, job: Job, worker: WorkerProcess, *, waiting: bool = False, garbled: bool = False
    ) -> SampleResult:
        assert worker.returncode is not None
        how = describe_exit(worker.returncode)
        if garbled:
            error = (
                "the reward wrote to its worker's result pipe (bytes that are not the runtime's frames); "
                "the worker process was killed"
            )
        elif waiting:
            error = f"the reward's worker process {how} with this sample waiting in it, {MAX_ORPHANED} times in a row"
        elif self.settings.raw:  # not a reward, nor a score: what it was called for is the caller's to say
            error = f"its worker process {how} while running it"
        else:
            error = f"the reward's worker process {how} while scoring this sample"
        if self.memory_limit_mb and worker.returncode < 0:
            error += (
                f" (its memory limit is {self.memory_limit_mb} MB: a reward that reaches it can die this way)"
            )
        return SampleResult(job.index, Outcome.REWARD_CRASH, None, error, None, worker.tail.text())

    def _settle(self, job: Job, outcome: Any) -> None:
        if not job.dropped:
            job.dropped = True
            job.deliver(outcome)

    # -- workers ----------------------------------------------------------------------------------

    def _new_worker(self) -> WorkerProcess:
        worker = WorkerProcess(self.settings, on_results=self._results, on_gone=self._gone)
        self._all.append(worker)
        self.stats.workers_started += 1
        return worker

    def _forget(self, worker: WorkerProcess) -> None:
        if worker in self._all:
            self._all.remove(worker)

    def _replace(self) -> None:
        if not self._closed:
            task = asyncio.ensure_future(self._add_worker())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _add_worker(self) -> None:
        failure: BaseException | None = None
        for delay in RESTART_DELAYS:
            await asyncio.sleep(delay)
            worker = self._new_worker()
            try:
                await worker.start(START_TIMEOUT)
            except WorkerStartError as exc:
                worker.kill_now()
                self._forget(worker)
                failure = exc
                continue
            self._held[worker] = {}
            self._schedule_dispatch()
            return
        assert failure is not None
        if not any(w.ready for w in self._held) and len(self._starting) <= 1:
            self._failure = failure
            self._fail_waiting(failure)

    def _fail_waiting(self, error: BaseException) -> None:
        for queue in (self._waiting, self._suspects):
            while queue:
                self._settle(queue.popleft(), error)


def _closed() -> RewardRuntimeError:
    return RewardRuntimeError("the reward runtime was closed before this sample was scored")
