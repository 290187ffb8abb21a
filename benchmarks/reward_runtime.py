"""The reward runtime against an in-process loop: throughput, isolation overhead, a hung sample cut.

Run: ``.venv/bin/python -m benchmarks.reward_runtime [--rows 10000] [--workers 2] [--rounds 3]``

Each scenario is measured side by side in one run, the variants interleaved round by round, and
reported as medians and ratios (the machine is shared: the load average is printed before and after).

1. A reward spending ~1 ms of CPU (a spin on the thread's CPU clock), 10,000 rows: the runtime with
   N workers against a plain loop calling the function in this process (goal >= 1.7x with 2 workers
   on 2 cores), and against the runtime in-process (``workers=0``).
2. A trivial reward (exact match), 10,000 rows: what isolation costs. The runtime with N workers,
   warm (started before the clock runs; the start is timed on its own), against the runtime
   in-process — the way the SDK scores in-process, through ``call_user``: goal <= 2x — and against
   the plain loop, the floor (no timeout, no isolation, nothing async). Also the trick that a
   worker calls a synchronous reward on its main thread (``concurrency=1``), against the same
   workers running it through their event loop and threads (``concurrency=2``): kept while >= 5%.
3. A hung sample among 1 ms rewards, N workers, timeout 1 s: when its ``reward_timeout`` arrives
   after the sample started (goal: timeout + <= 1 s), how many other rows finished meanwhile, and
   the run's wall time against the same rows without the hung one.

The plain loop calls ``to_score(fn(solution_str, ground_truth, extra_info))`` per row.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from osmosis_ai.rewards.runtime import RewardRuntime
from osmosis_ai.rewards.score import to_score

BUSY = "benchmarks.reward_runtime:busy"
TRIVIAL = "benchmarks.reward_runtime:trivial"
HANG_OR_BUSY = "benchmarks.reward_runtime:hang_or_busy"


def busy(solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None) -> float:
    """Spend 1 ms of this thread's CPU time, then score by exact match."""
    end = time.thread_time() + 0.001
    while time.thread_time() < end:
        pass
    return 1.0 if solution_str == ground_truth else 0.0


def trivial(solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None) -> float:
    return 1.0 if solution_str.strip() == ground_truth.strip() else 0.0


def hang_or_busy(solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None) -> float:
    while solution_str == "hang":
        pass
    return busy(solution_str, ground_truth, extra_info)


def _rows(count: int) -> list[dict[str, Any]]:
    return [
        {"solution_str": f"answer {i % 7}", "ground_truth": "answer 3", "extra_info": {"i": i}}
        for i in range(count)
    ]


def plain_loop(fn: Callable[..., Any], rows: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    name = fn.__name__
    for row in rows:
        to_score(fn(row["solution_str"], row["ground_truth"], dict(row["extra_info"])), name)
    return time.perf_counter() - started


async def through_runtime(runtime: RewardRuntime, rows: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    done = 0
    async for result in runtime.stream(rows):
        assert result.ok, result
        done += 1
    assert done == len(rows)
    return time.perf_counter() - started


async def compare(spec: str, fn: Callable[..., Any], rows: list[dict[str, Any]], workers: int,
                  rounds: int, *, threaded: bool = False) -> dict[str, float]:  # fmt: skip
    times: dict[str, list[float]] = {"loop": [], "inprocess": [], "pool": [], "start": [], "threaded": []}
    for _ in range(rounds):
        times["loop"].append(plain_loop(fn, rows))
        async with RewardRuntime(spec, workers=0) as inproc:
            times["inprocess"].append(await through_runtime(inproc, rows))
        started = time.perf_counter()
        async with RewardRuntime(spec, workers=workers) as pool:
            times["start"].append(time.perf_counter() - started)
            times["pool"].append(await through_runtime(pool, rows))
        if threaded:
            async with RewardRuntime(spec, workers=workers, concurrency=2) as pool:
                times["threaded"].append(await through_runtime(pool, rows))
    return {side: statistics.median(values) for side, values in times.items() if values}


async def hung(rows: int, workers: int, timeout: float) -> dict[str, float]:
    plain = _rows(rows)
    async with RewardRuntime(HANG_OR_BUSY, workers=workers, timeout=timeout) as runtime:
        without = await through_runtime(runtime, plain)
    with_hang = [{"solution_str": "hang", "ground_truth": ""}, *plain]
    async with RewardRuntime(HANG_OR_BUSY, workers=workers, timeout=timeout) as runtime:
        started = time.perf_counter()
        finished_before, cut, count = 0, 0.0, 0
        async for result in runtime.stream(with_hang):
            count += 1
            if result.index == 0:
                assert result.error and "timeout" in result.error, result
                cut, finished_before = time.perf_counter() - started, count - 1
            else:
                assert result.ok, result
        wall = time.perf_counter() - started
        assert count == len(with_hang) and runtime.stats.killed == 1
    return {"cut": cut, "during": finished_before, "wall": wall, "without": without}


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n, w = args.rows, args.workers
    print(f"load average before: {_load()} ({os.cpu_count()} CPUs)")

    cpu = asyncio.run(compare(BUSY, busy, _rows(n), w, args.rounds))
    print(f"\n1. a reward spending ~1 ms of CPU, {n:,} rows (median of {args.rounds} interleaved rounds)")
    print(f"   plain loop in this process   {cpu['loop']:8.2f} s")
    print(f"   runtime, in-process          {cpu['inprocess']:8.2f} s")
    print(
        f"   runtime, {w} workers (warm)    {cpu['pool']:8.2f} s   (their start: {cpu['start'] * 1000:.0f} ms)"
    )
    print(f"   speed-up over the plain loop {cpu['loop'] / cpu['pool']:8.2f}x  (goal >= 1.7x with 2 workers)")

    cheap = asyncio.run(compare(TRIVIAL, trivial, _rows(n), w, args.rounds, threaded=True))
    print(f"\n2. a trivial reward, {n:,} rows (median of {args.rounds} interleaved rounds)")
    print(
        f"   plain loop in this process   {cheap['loop'] * 1000:8.1f} ms  ({cheap['loop'] / n * 1e6:.2f} µs/row)"
    )
    print(
        f"   runtime, in-process          {cheap['inprocess'] * 1000:8.1f} ms  ({cheap['inprocess'] / n * 1e6:.2f} µs/row)"
    )
    print(f"   runtime, {w} workers (warm)    {cheap['pool'] * 1000:8.1f} ms  ({cheap['pool'] / n * 1e6:.2f} µs/row; "
          f"their start: {cheap['start'] * 1000:.0f} ms)")  # fmt: skip
    print(f"   isolation vs in-process      {cheap['pool'] / cheap['inprocess']:8.2f}x  (goal <= 2x)")
    print(f"   isolation vs the plain loop  {cheap['pool'] / cheap['loop']:8.2f}x  (the floor)")
    print(f"   trick: main thread vs the event loop and threads in the workers: {cheap['threaded'] * 1000:.1f} ms, "
          f"{cheap['threaded'] / cheap['pool']:.2f}x the time (kept while >= 1.05x)")  # fmt: skip

    stall = asyncio.run(hung(max(n // 5, 100), w, timeout=1.0))
    print(
        f"\n3. one hung sample among {max(n // 5, 100):,} rows of the 1 ms reward, {w} workers, timeout 1 s"
    )
    print(f"   its reward_timeout arrived   {stall['cut']:8.2f} s after the start: timeout + {stall['cut'] - 1.0:.2f} s "
          "(goal <= 1 s)")  # fmt: skip
    print(f"   rows finished meanwhile      {stall['during']:8.0f}")
    print(f"   wall with / without the hang {stall['wall']:8.2f} / {stall['without']:.2f} s "
          f"({stall['wall'] / stall['without']:.2f}x)")  # fmt: skip
    print(f"\nload average after: {_load()}")


if __name__ == "__main__":
    main()
