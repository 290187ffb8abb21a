"""``RewardRuntime``: the handle a run holds to score samples with one reward, isolated and killable.

One runtime serves a whole run: start it once (``async with`` or :meth:`RewardRuntime.start`),
``await runtime.score(sample)`` from as many tasks as the run has in flight (each call waits for its
own result, so the queue never holds more than the callers put in it), or
:meth:`RewardRuntime.stream` a whole iterable of rows, then close it. Closing ends every worker
process, on every path: a normal close, an exception or a cancellation in the caller (both go
through ``__aexit__``), Ctrl-C (``asyncio.run`` cancels the task, which is the same path), a
runtime never closed (its worker processes are killed when it is garbage collected, and at
interpreter exit at the latest).

A sample the reward fails on is never an exception: it is a :class:`SampleResult` with a typed
outcome. Exceptions are for what is not the reward's doing on one sample: a reward that cannot be
loaded or settings out of range (raised by the constructor, before any process starts), a row that
cannot be scored as given (:class:`RewardInputError`), worker processes that cannot be started
(:class:`WorkerStartError`), or a closed runtime.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from osmosis_ai._usercode import UserThreads
from osmosis_ai.rewards.runtime import worker as worker_module
from osmosis_ai.rewards.runtime.errors import RewardRuntimeError, RewardSettingError
from osmosis_ai.rewards.runtime.inprocess import CANNOT_KILL, InProcess
from osmosis_ai.rewards.runtime.pool import MAX_BATCH, ProcessPool
from osmosis_ai.rewards.runtime.protocol import WorkerSettings
from osmosis_ai.rewards.runtime.sample import Sample, SampleResult, prepare
from osmosis_ai.rewards.runtime.stats import RuntimeStats
from osmosis_ai.rewards.runtime.target import RAW, resolve

DEFAULT_TIMEOUT = 60.0
"""Seconds a reward may spend on one sample unless told otherwise (``timeout=None``: no limit)."""
DEFAULT_OUTPUT_LIMIT = 4096
"""Characters of a sample's printed output that are kept."""
DEFAULT_ASYNC_CONCURRENCY = 16
"""Samples an async reward runs at once in each worker (a synchronous one runs one at a time)."""

Row = Sample | Mapping[str, Any]


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class RewardRuntime:
    """Score samples with ``reward`` in a warm pool of worker processes (or in-process).

    Args:
        reward: ``"module.path:attribute"``, or the callable itself (which worker processes must be
            able to import by name; see :mod:`osmosis_ai.rewards.runtime.target`). Sync or async;
            an ``@osmosis_reward``/``@osmosis_rubric`` function or an eval function, simple
            ``fn(solution_str, ground_truth, extra_info)`` or full ``fn(messages, ground_truth, metadata)``.
        timeout: seconds per sample, measured in the worker from the moment it starts the sample;
            a sample past it is ``reward_timeout`` and its worker is killed and replaced. ``None``
            for no limit.
        workers: worker processes (default: the CPUs available). ``0`` runs the reward in this
            process, which **cannot kill** a reward that hangs and cannot survive one that crashes
            (:mod:`osmosis_ai.rewards.runtime.inprocess`).
        memory_limit_mb: address-space limit (``RLIMIT_AS``) of each worker; past it the sample is
            ``reward_crash``. Needs workers.
        concurrency: samples each worker runs at once (default 1 for a synchronous reward, which
            then runs on the worker's main thread, 16 for an async one). A synchronous reward that
            waits on the network, such as a rubric calling a judge, wants more. In-process, a
            synchronous reward runs in as many threads as the SDK's shared ones by default.
        output_limit: characters of each sample's printed output kept in its result.
        kind: what the reward is called in error messages (``"eval function"``).
        raw: ``reward`` is any callable, not a reward: :meth:`call` passes it arguments as given and
            returns what it returned (``SampleResult.value``, which must pickle). Needs workers.
        caller_deadlines: the callers keep each sample's deadline (they cancel :meth:`call` or
            :meth:`score` when it passes; use ``timeout=None``): a worker is sent only what it can
            start at once, and one still running a sample whose caller stopped waiting is killed
            and replaced. Needs workers.
        setup: ``"module.path:attribute"`` of an async function each worker process awaits once,
            with ``setup_args`` (they must pickle), before it takes any sample, on the event loop
            its samples then run on (so what it builds there serves them all); its time is no
            sample's. A setup that raises fails the worker's start (:class:`WorkerStartError`).
            Needs workers.
    """

    def __init__(
        self,
        reward: str | Callable[..., Any],
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        workers: int | None = None,
        memory_limit_mb: int | None = None,
        concurrency: int | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        kind: str = "reward function",
        raw: bool = False,
        caller_deadlines: bool = False,
        setup: str | None = None,
        setup_args: tuple[Any, ...] = (),
    ) -> None:
        self.timeout = _check_timeout(timeout)
        self.workers = default_workers() if workers is None else _check_count("workers", workers, minimum=0)
        if (raw or caller_deadlines or setup) and self.workers == 0:
            raise RewardSettingError("raw, caller_deadlines and setup need worker processes (workers >= 1)")
        self.memory_limit_mb = _check_memory(memory_limit_mb, self.workers)
        if self.workers and os.name != "posix":
            raise RewardSettingError(
                "worker processes need a POSIX system; use workers=0 to score in-process"
            )
        if self.workers and worker_module.IN_WORKER:
            raise RewardSettingError(
                "a reward worker process cannot start reward workers of its own; if the reward lives in "
                'a script that scores, put the scoring under `if __name__ == "__main__":`'
            )
        output_limit = _check_count("output_limit", output_limit, minimum=0)
        self.target = resolve(reward, by_name=self.workers > 0, shaped=not raw)
        if self.target.is_async:
            default_concurrency = DEFAULT_ASYNC_CONCURRENCY
        else:  # a worker calls a sync reward on its main thread; in-process it needs threads to overlap
            default_concurrency = 1 if self.workers else UserThreads().max_threads
        self.concurrency = (
            default_concurrency if concurrency is None else _check_count("concurrency", concurrency)
        )
        self._backend: ProcessPool | InProcess
        if self.workers == 0:
            self._backend = InProcess(
                self.target, timeout=self.timeout, concurrency=self.concurrency, kind=kind
            )
        else:
            assert self.target.module is not None and self.target.attribute is not None
            cwd = os.getcwd()
            settings = WorkerSettings(
                sys_path=[cwd, *(p for p in sys.path if p not in (cwd, ""))],
                argv=list(sys.argv),
                module=self.target.module,
                attribute=self.target.attribute,
                main_file=self.target.main_file,
                keywords=self.target.keywords,
                name=self.target.name,
                kind=kind,
                timeout=self.timeout,
                concurrency=self.concurrency,
                window=self.concurrency + 2 * MAX_BATCH,
                memory_limit_mb=self.memory_limit_mb,
                output_limit=output_limit,
                raw=raw,
                setup=setup,
                setup_args=setup_args,
            )
            self._backend = ProcessPool(
                self.target,
                settings,
                workers=self.workers,
                memory_limit_mb=self.memory_limit_mb,
                caller_deadlines=caller_deadlines,
            )
        self._started = False
        self._closed = False
        self._starting: asyncio.Lock | None = None

    @property
    def isolated(self) -> bool:
        """Whether samples run in worker processes (``False``: in-process, nothing can be killed)."""
        return self.workers > 0

    @property
    def pids(self) -> tuple[int, ...]:
        """The worker processes running now."""
        return self._backend.pids

    @property
    def stats(self) -> RuntimeStats:
        return self._backend.stats

    def describe(self) -> str:
        """One line saying how samples are run, for a run's header."""
        limit = f"timeout {self.timeout:g} s per sample" if self.timeout is not None else "no timeout"
        at_once = f"{self.concurrency} sample{'s' if self.concurrency > 1 else ''} at once"
        if not self.isolated:
            return f"{self.target.name}: {CANNOT_KILL}; {limit}, {at_once}"
        memory = f"memory limit {self.memory_limit_mb} MB" if self.memory_limit_mb else "no memory limit"
        plural = "es" if self.workers > 1 else ""
        return f"{self.target.name}: {self.workers} worker process{plural}, {limit}, {memory}, {at_once} per worker"

    async def start(self) -> None:
        """Start the worker processes (once; :meth:`score` and :meth:`stream` start them if needed)."""
        if self._closed:
            raise RewardRuntimeError("the reward runtime is closed")
        if self._started:
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if not self._started:
                await self._backend.start()  # on failure or cancellation it leaves no worker behind
                self._started = True

    async def score(self, sample: Row, *, index: int | None = None) -> SampleResult:
        """Score one sample; ``index`` is copied into the result. Safe to call from many tasks at once."""
        if self.target.mode == RAW:
            raise RewardRuntimeError("score() is for a reward; run a raw target with call()")
        await self.start()
        return await self._submit(prepare(sample, index, self.target.mode), index)

    async def call(self, *args: Any) -> SampleResult:
        """Run a ``raw`` target on ``args`` (they must pickle); its return value is the result's
        ``value``. Safe to call from many tasks at once."""
        if self.target.mode != RAW:
            raise RewardRuntimeError("call() is for a raw target; score a reward with score()")
        await self.start()
        return await self._submit(args, None)

    async def _submit(self, args: tuple[Any, ...], index: int | None) -> SampleResult:
        future: asyncio.Future[SampleResult] = asyncio.get_running_loop().create_future()
        job: Any = self._backend.submit(args, index, lambda outcome: _settle(future, outcome))
        try:
            return await future
        finally:
            if not future.done() or future.cancelled():  # a cancelled caller cancels the future too
                self._backend.drop(job)

    def stream(
        self, rows: Iterable[Row] | AsyncIterable[Row], *, max_in_flight: int | None = None
    ) -> AsyncIterator[SampleResult]:
        """Score ``rows`` (taken lazily, at most ``max_in_flight`` ahead) and yield each result as it
        finishes; ``result.index`` is the row's position. A row that cannot be scored as given
        (:class:`RewardInputError`), or an error from ``rows`` itself, stops the taking of rows: what
        is in flight is still yielded, then the error is raised.
        """
        return self._stream(rows, max_in_flight, prepared=False)

    async def _stream(
        self, rows: Iterable[Any] | AsyncIterable[Any], max_in_flight: int | None, *, prepared: bool
    ) -> AsyncIterator[SampleResult]:
        """:meth:`stream`; with ``prepared``, ``rows`` holds arguments :func:`prepare` made already."""
        await self.start()
        limit = _check_count("max_in_flight", max_in_flight if max_in_flight is not None else self.in_flight)
        mode, submit = self.target.mode, self._backend.submit
        finished: deque[Any] = deque()
        wake = asyncio.Event()
        jobs: dict[int, Any] = {}
        problem: Exception | None = None
        sync_rows = iter(rows) if isinstance(rows, Iterable) else None
        async_rows = aiter(rows) if sync_rows is None else None  # type: ignore[arg-type]
        taken, exhausted = 0, False

        def deliver(position: int) -> Callable[[Any], None]:
            def settle(outcome: Any) -> None:
                jobs.pop(position, None)
                finished.append(outcome)
                wake.set()

            return settle

        try:
            while True:
                while not exhausted and len(jobs) < limit:
                    try:
                        row = next(sync_rows) if sync_rows is not None else await anext(async_rows)  # type: ignore[arg-type]
                        args = row if prepared else prepare(row, taken, mode)
                        jobs[taken] = submit(args, taken, deliver(taken))
                    except (StopIteration, StopAsyncIteration):
                        exhausted = True
                        break
                    except Exception as exc:  # a bad row, or the rows' own source failing: finish what runs
                        problem, exhausted = exc, True
                        break
                    taken += 1
                if not jobs and not finished:
                    break
                while not finished:
                    wake.clear()
                    await wake.wait()
                while finished:
                    outcome = finished.popleft()
                    if isinstance(outcome, BaseException):
                        raise outcome
                    yield outcome
            if problem is not None:
                raise problem
        finally:
            for job in jobs.values():
                self._backend.drop(job)

    async def close(self) -> None:
        """End every worker process and fail what is still waiting (:class:`RewardRuntimeError`)."""
        if self._closed:
            return
        self._closed = True
        await self._backend.close()

    async def __aenter__(self) -> RewardRuntime:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def in_flight(self) -> int:
        """How many samples callers should keep submitted for every worker to stay busy (what
        :meth:`stream` keeps in flight unless told otherwise)."""
        if not self.isolated:
            return max(64, 2 * self.concurrency)
        return 2 * self.workers * (self.concurrency + 2 * MAX_BATCH)


def _settle(future: asyncio.Future[SampleResult], outcome: Any) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise RewardSettingError(
            f"timeout must be a positive number of seconds, or None for no timeout; got {timeout!r}"
        )
    return float(timeout)


def _check_count(name: str, value: int, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RewardSettingError(f"{name} must be a whole number of at least {minimum}, got {value!r}")
    return value


def _check_memory(memory_limit_mb: int | None, workers: int) -> int | None:
    if memory_limit_mb is None:
        return None
    _check_count("memory_limit_mb", memory_limit_mb)
    if workers == 0:
        raise RewardSettingError(
            "memory_limit_mb needs worker processes: in-process (workers=0) a reward's memory cannot be limited"
        )
    try:
        import resource

        resource.RLIMIT_AS  # noqa: B018 - only checking that the platform has it
    except (ImportError, AttributeError):
        raise RewardSettingError(
            "memory_limit_mb needs RLIMIT_AS, which this platform does not have"
        ) from None
    return memory_limit_mb
