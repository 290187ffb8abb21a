"""The in-process mode (``workers=0``): the reward runs in this process, called the way all user code is.

It is there for cheap rewards and for tests: nothing to start, nothing to pickle, any callable
(closures and lambdas included). It **cannot kill**. A synchronous reward past its timeout is
reported as ``reward_timeout`` but goes on running in its thread — a daemon thread of
:class:`~osmosis_ai._usercode.UserThreads`, so it cannot keep the process from exiting, abandoned
to itself while later samples get fresh threads; an async reward is cancelled, which it may ignore.
A reward that calls ``os._exit``, segfaults or is killed for its memory takes this process with it,
and its output goes wherever this process's output goes. The timeout is counted from the moment a
thread or task is given the sample, on this event loop, so a loop that lags adds to it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from osmosis_ai._usercode import UserThreads, call_user, forget_traceback
from osmosis_ai.errors import InfrastructureError
from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.runtime.errors import RewardRuntimeError
from osmosis_ai.rewards.runtime.pool import Deliver
from osmosis_ai.rewards.runtime.sample import SampleResult
from osmosis_ai.rewards.runtime.stats import RuntimeStats
from osmosis_ai.rewards.runtime.target import RewardTarget, first_line
from osmosis_ai.rewards.score import to_score

CANNOT_KILL = (
    "in-process (workers=0): a reward that hangs keeps running and one that crashes ends this process"
)


class InProcess:
    """Scores ``target`` on the running event loop, at most ``concurrency`` samples at once."""

    pids: tuple[int, ...] = ()

    def __init__(self, target: RewardTarget, *, timeout: float | None, concurrency: int, kind: str) -> None:
        self.target = target
        self.timeout = timeout
        self.concurrency = concurrency
        self.kind = kind
        self.stats = RuntimeStats()
        self._threads = UserThreads(concurrency, name="osmosis-reward")
        self._slots: asyncio.Semaphore | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def start(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)

    def submit(self, args: tuple[Any, ...], index: int | None, deliver: Deliver) -> asyncio.Task[None]:
        if self._closed:
            raise RewardRuntimeError("the reward runtime is closed")
        task = asyncio.ensure_future(self._run(args, index, deliver))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def drop(self, job: asyncio.Task[None]) -> None:
        job.cancel()

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    async def _run(self, args: tuple[Any, ...], index: int | None, deliver: Deliver) -> None:
        assert self._slots is not None
        async with self._slots:
            keywords = self.target.keywords
            kwargs = dict(zip(keywords, args, strict=True)) if keywords is not None else {}
            positional = args if keywords is None else ()
            started = time.monotonic()
            call = asyncio.ensure_future(
                call_user(self.target.function, *positional, threads=self._threads, **kwargs)
            )
            try:
                done, _ = await asyncio.wait({call}, timeout=self.timeout)
            finally:
                if not call.done():
                    call.cancel()
            duration = time.monotonic() - started
            if not done:
                deliver(self._timed_out(index, duration))
                return
            try:
                score = to_score(call.result(), self.target.name, kind=self.kind)
            except MemoryError as exc:
                forget_traceback(exc)
                deliver(
                    SampleResult(
                        index, Outcome.REWARD_CRASH, None, f"{first_line(exc)}: out of memory", duration
                    )
                )
            except InfrastructureError as exc:
                forget_traceback(exc)
                deliver(SampleResult(index, Outcome.INFRA_ERROR, None, first_line(exc), duration))
            except Exception as exc:
                forget_traceback(exc)
                deliver(SampleResult(index, Outcome.REWARD_ERROR, None, first_line(exc), duration))
            else:
                deliver(SampleResult(index, Outcome.COMPLETED, score, None, duration))

    def _timed_out(self, index: int | None, duration: float) -> SampleResult:
        if self.target.is_async:
            how = "it was cancelled, but in-process (workers=0) a reward that ignores cancellation keeps running"
        else:
            # the thread it holds is abandoned with it; later samples get threads of their own
            self._threads = UserThreads(self.concurrency, name="osmosis-reward")
            how = "in-process (workers=0) it cannot be stopped and may still be running"
        error = f"the reward ran past its {self.timeout:g} s timeout; {how}"
        return SampleResult(index, Outcome.REWARD_TIMEOUT, None, error, duration)
