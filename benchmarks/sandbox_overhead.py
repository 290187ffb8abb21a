"""What the sandbox's local tier costs over a bare subprocess, for ``python -c pass``.

Run: ``.venv/bin/python -m benchmarks.sandbox_overhead [--runs N]``.

Three ways of running the same interpreter, alternated in one run (the machine is shared and noisy),
each timed from spawn to exit with asyncio's subprocess API: a bare subprocess; ``run(command=[python,
"-c", "pass"])`` (bwrap, namespaces, prlimit: the tier alone); and ``run("pass")`` (the tier plus the
harness that runs code and tests). Reported: p50 and p95 of each and their overhead over the bare
start. Goal: the tier adds at most 50 ms at p50.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from osmosis_ai.sandbox import SandboxOutcome, probe, run

GOAL_MS = 50.0


async def _bare(python: str) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(python, "-I", "-c", "pass")
    await process.wait()
    return time.perf_counter() - started


async def _tier(python: str) -> float:
    started = time.perf_counter()
    result = await run(command=[python, "-I", "-c", "pass"])
    assert result.outcome is SandboxOutcome.PASSED, result
    return time.perf_counter() - started


async def _harness(python: str) -> float:
    started = time.perf_counter()
    result = await run("pass")
    assert result.outcome is SandboxOutcome.PASSED, result
    return time.perf_counter() - started


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


async def _main(runs: int) -> int:
    machine = await probe()
    if machine.tier is None or machine.python is None:
        print(f"no sandbox tier here: {machine.refusal or machine.python_note}")
        return 1
    python = machine.python
    times: dict[str, list[float]] = {
        "bare subprocess": [],
        "sandbox (command)": [],
        "sandbox (code, harness)": [],
    }
    ways = list(zip(times, (_bare, _tier, _harness), strict=True))
    for way in ways:  # one warm-up each: page cache, the probe
        await way[1](python)
    for index in range(runs):
        for name, measure in ways[index % 3 :] + ways[: index % 3]:
            times[name].append(await measure(python))
    bare50, bare95 = _p(times["bare subprocess"], 0.5), _p(times["bare subprocess"], 0.95)
    print(f"sandbox overhead, {runs} alternating runs each of {python} -I -c pass")
    rows = [["way", "p50 ms", "p95 ms", "overhead p50", "overhead p95"]]
    for name, values in times.items():
        p50, p95 = _p(values, 0.5), _p(values, 0.95)
        rows.append([name, f"{p50:.1f}", f"{p95:.1f}", f"+{p50 - bare50:.1f} ms", f"+{p95 - bare95:.1f} ms"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    tier = _p(times["sandbox (command)"], 0.5) - bare50
    print(f"mean bare {statistics.fmean(times['bare subprocess']) * 1000:.1f} ms")
    met = tier <= GOAL_MS
    print(f"goal: the tier adds <= {GOAL_MS:.0f} ms at p50: {'met' if met else 'NOT met'} (+{tier:.1f} ms)")
    return 0 if met else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs of each way (default 100)")
    return asyncio.run(_main(parser.parse_args().runs))


if __name__ == "__main__":
    sys.exit(main())
