"""A 0.3 grader in the reward runtime's workers against the same grader in the server's process.

Run: ``.venv/bin/python -m benchmarks.grader_runtime [--grades 2000] [--workers 2] [--rounds 3]``

1. Overhead per graded rollout: an exact-match grader on a four-message sample, graded the way the
   0.3 server grades (``LocalBackend.grade`` in-process; ``GraderRuntime.grade`` with
   ``LocalBackend(grader_workers=N)``), one at a time (the latency a rollout pays) and 16 at once
   (a busy server), the variants interleaved round by round; medians in µs per grade.
2. A grader blocking its process (``time.sleep``) under a 1 s deadline, cut as the server cuts it
   (the caller's deadline): when its worker is gone and when the next grade is answered, measured
   from the start of the blocking grade (goal: deadline + <= 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from typing import Any

from osmosis_ai.rollout.backend.local.grading import GraderRuntime
from osmosis_ai.rollout.context import GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.types.sample import ExecutionRequest, RolloutSample

EXACT = "benchmarks.grader_runtime:Exact"
SLEEPS = "benchmarks.grader_runtime:Sleeps"


class Exact(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if str(ctx.sample.messages[-1]["content"]).strip() == ctx.label else 0.0)


class Sleeps(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        if (ctx.metadata or {}).get("sleep"):
            time.sleep(600)
        ctx.set_reward(1.0)


REQUEST = ExecutionRequest(id="bench", prompt=[], label="4", metadata={})


def _sample() -> RolloutSample:
    return RolloutSample(
        messages=[
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": "What is 2 + 2? " * 20},
            {"role": "assistant", "content": "Let me think. " * 20},
            {"role": "assistant", "content": "4"},
        ]
    )


async def in_process(grades: int, at_once: int) -> float:
    from osmosis_ai.rollout.backend.local.backend import grade_sample

    async def one() -> Any:
        return await grade_sample(Exact, None, REQUEST.label, REQUEST.metadata, _sample())

    return await _timed(one, grades, at_once)


async def in_workers(runtime: GraderRuntime, grades: int, at_once: int) -> float:
    async def one() -> Any:
        graded = await runtime.grade(REQUEST, _sample())
        assert isinstance(graded, RolloutSample) and graded.reward == 1.0, graded
        return graded

    return await _timed(one, grades, at_once)


async def _timed(one: Any, grades: int, at_once: int) -> float:
    """µs per grade, ``at_once`` grades in flight."""
    left = grades

    async def lane() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(at_once)))
    return (time.perf_counter() - started) / grades * 1e6


async def overhead(grades: int, workers: int, rounds: int) -> None:
    runtime = GraderRuntime(EXACT, None, workers)
    started = time.perf_counter()
    await runtime.start()
    print(f"{workers} grader workers started in {(time.perf_counter() - started) * 1e3:.0f} ms")
    try:
        for at_once in (1, 16):
            here: list[float] = []
            there: list[float] = []
            for _ in range(rounds):
                here.append(await in_process(grades, at_once))
                there.append(await in_workers(runtime, grades, at_once))
            a, b = statistics.median(here), statistics.median(there)
            print(
                f"{at_once:>2} at once: in-process {a:8.1f} µs/grade, in {workers} workers {b:8.1f} µs/grade: "
                f"+{b - a:.1f} µs per graded rollout ({b / a:.1f}x)"
            )
    finally:
        await runtime.close()


async def hang_cut(workers: int, deadline: float) -> None:
    runtime = GraderRuntime(SLEEPS, None, workers)
    await runtime.start()
    try:
        pids = set(runtime.runtime.pids)
        hung = ExecutionRequest(id="hung", prompt=[], label="4", metadata={"sleep": True})
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(runtime.grade(hung, _sample()), deadline)
        failed = time.monotonic() - started
        while pids <= {pid for pid in pids if _alive(pid)}:
            await asyncio.sleep(0.005)
        gone = time.monotonic() - started
        graded = await runtime.grade(REQUEST, _sample())
        answered = time.monotonic() - started
        assert isinstance(graded, RolloutSample)
        print(
            f"a grader blocking its process, deadline {deadline:g} s: typed timeout at {failed:.3f} s, "
            f"its worker gone at {gone:.3f} s, the next grade answered at {answered:.3f} s "
            f"(deadline + {answered - deadline:.3f} s)"
        )
    finally:
        await runtime.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grades", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    asyncio.run(overhead(args.grades, args.workers, args.rounds))
    asyncio.run(hang_cut(args.workers, 1.0))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
