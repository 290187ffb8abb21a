"""Concurrency that tunes itself against a server of unknown capacity, beside the best fixed limit.

Run: ``.venv/bin/python -m benchmarks.adaptive_concurrency [--capacity 32] [--latency 0.1] [--seconds 20]``

The server is ``benchmarks/capacity_server.py`` in a child process (its CPU is not the client's):
``--capacity`` requests served at once for about ``--latency`` seconds each, the next ones queued,
429 with ``Retry-After: 1`` past twice the capacity. The client never learns the capacity. It sends
chat completions through :func:`~osmosis_ai._pool.run_bounded` over the SDK's shared HTTP pool,
retrying refusals with the SDK's retry policy (4 attempts), and reports every answer to the limit
as the model-call seam will. Measured side by side, ``--seconds`` each:

1. a sweep of fixed limits (4 to 256, powers of two): the best fixed throughput among the limits
   that fail < 1% of requests (a setting a user would keep; the highest of all is printed too);
2. ``auto`` (:class:`~osmosis_ai.models.concurrency.AdaptiveLimit`, no tuning), from latency and
   refusals alone, and again reading the server's vLLM-style ``/metrics``;
3. the capacity halved half way through a run of twice the length: ``auto`` both ways and the best
   fixed limit of step 1, each judged on the second half against the halved capacity.

4. the same sweep and ``auto`` against a second server that refuses only past 8x the capacity
   (``--refuse-past 8``), whose service also slows as its batch fills (``--batch-slowdown``, 0.5:
   a full batch 1.5x slower), as a continuous-batching server's does: capacity shows only as latency
   rising, first with the batch, then with the queue.

Goal: ``auto`` reaches >= 0.9x the best fixed throughput with < 1% failed requests (an item whose
every attempt failed), and recovers when the capacity halves. Throughput counts the requests
answered before each run's end; the limit over time of the halving runs and of the latency-only
``auto`` runs is printed as a table (the stand-in's knee is at its capacity).
The load average is printed before and after: the machine is shared, so compare only figures from
runs at low load.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from benchmarks.capacity_server import CapacityServerProcess
from osmosis_ai._http import NoAnswer, Pool, RetryPolicy, parse_retry_after, shared_pool
from osmosis_ai._pool import FixedLimit, Limit, run_bounded
from osmosis_ai.models.concurrency import (
    AdaptiveLimit,
    CallOutcome,
    metrics_url_for,
    observer_of,
    outcome_for_status,
)

SWEEP = (4, 8, 16, 32, 64, 128, 256)
BODY = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "Say ok."}]}).encode()
HEADERS = {"Content-Type": "application/json"}
RETRY = RetryPolicy(max_attempts=4)
LATENCY_ONLY = 8.0  # the latency-only server refuses past this many times its capacity
TICK = 1.0  # seconds per row of the limit-over-time table


@dataclass
class Run:
    """What one client run did."""

    label: str
    seconds: float
    completed: int = 0
    failed: int = 0
    answers: int = 0
    refused: int = 0
    latencies: list[float] = field(default_factory=list)
    ticks: list[tuple[float, int, int]] = field(default_factory=list)  # (t, limit, answered in the tick)
    summary: dict[str, Any] | None = None
    halved_at: float | None = None
    completed_after_halving: int = 0

    @property
    def throughput(self) -> float:
        return self.completed / self.seconds

    @property
    def failed_share(self) -> float:
        return self.failed / max(self.completed + self.failed, 1)

    @property
    def refused_share(self) -> float:
        return self.refused / max(self.answers, 1)


def _level(limit: Limit) -> int:
    return limit.limit if isinstance(limit, AdaptiveLimit) else limit.ceiling


async def drive(
    base_url: str, limit: Limit, label: str, seconds: float, pool: Pool, *, halve: int | None = None
) -> Run:
    """Send requests for ``seconds`` with at most ``limit`` in flight; with ``halve``, set that capacity mid-run."""
    run = Run(label, seconds)
    url = f"{base_url}/chat/completions"
    observer = observer_of(limit)
    start = time.monotonic()
    deadline = start + seconds
    answered_in_tick = 0

    async def one(_: int) -> None:
        nonlocal answered_in_tick
        for attempt in itertools.count(1):
            sent = time.monotonic()
            retry_after = None
            try:
                response = await pool.request("POST", url, body=BODY, headers=HEADERS, timeout=30.0)
            except NoAnswer as exc:
                outcome = CallOutcome.TIMEOUT if exc.timed_out else CallOutcome.ERROR
            else:
                outcome = outcome_for_status(response.status)
                retry_after = parse_retry_after(response.retry_after)
                if outcome is CallOutcome.SUCCESS:
                    json.loads(response.body)  # read as a client would
            now = time.monotonic()
            if observer is not None:
                observer.observe(outcome, now - sent, retry_after=retry_after)
            if now > deadline:
                return  # answered after the end: counted neither way
            run.answers += 1
            if outcome is CallOutcome.SUCCESS:
                run.completed += 1
                answered_in_tick += 1
                run.latencies.append(now - sent)
                if run.halved_at is not None and now - start >= run.halved_at:
                    run.completed_after_halving += 1
                return
            run.refused += outcome is CallOutcome.REFUSED
            if not RETRY.should_retry(attempt):
                run.failed += 1
                return
            await asyncio.sleep(RETRY.delay(attempt, retry_after))

    async def watch() -> None:
        nonlocal answered_in_tick
        for tick in itertools.count(1):
            await asyncio.sleep(max(0.0, start + tick * TICK - time.monotonic()))
            run.ticks.append((tick * TICK, _level(limit), answered_in_tick))
            answered_in_tick = 0

    async def halve_later(capacity: int) -> None:
        await asyncio.sleep(seconds / 2)
        await _set_capacity(pool, base_url, capacity)
        run.halved_at = time.monotonic() - start

    helpers = [asyncio.create_task(watch())]
    if halve is not None:
        helpers.append(asyncio.create_task(halve_later(halve)))
    try:
        await run_bounded(
            itertools.count(), one, concurrency=limit, stop=lambda: time.monotonic() >= deadline
        )
    finally:
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
    if isinstance(limit, AdaptiveLimit):
        await limit.aclose()
        run.summary = limit.summary()
    return run


async def _set_capacity(pool: Pool, base_url: str, capacity: int) -> None:
    root = base_url.removesuffix("/v1")
    body = json.dumps({"capacity": capacity}).encode()
    response = await pool.request("POST", f"{root}/control", body=body, headers=HEADERS, timeout=10.0)
    if response.status != 200:
        raise RuntimeError(f"the capacity server refused the capacity {capacity}: {response.body!r}")


async def _drained(pool: Pool, base_url: str) -> None:
    """Wait until the server holds no request of an earlier run."""
    root = base_url.removesuffix("/v1")
    while json.loads((await pool.request("GET", f"{root}/stats", timeout=10.0)).body)["inside"]:
        await asyncio.sleep(0.1)


def _auto(base_url: str, metrics: bool) -> AdaptiveLimit:
    return AdaptiveLimit(metrics_url=metrics_url_for(base_url) if metrics else None)


async def measure(
    base_url: str, capacity: int, seconds: float, sweep: tuple[int, ...] = SWEEP
) -> dict[str, Any]:
    """Every run of the benchmark against the server at ``base_url``, whose capacity is ``capacity``."""
    pool = shared_pool(1024)  # more connections than any limit tried, so the pool never limits
    runs: list[Run] = []
    fixed: dict[str, int] = {}
    for n in sweep:
        await _drained(pool, base_url)
        runs.append(await drive(base_url, FixedLimit(n), f"fixed {n}", seconds, pool))
        fixed[runs[-1].label] = n
    usable = [run for run in runs if run.failed_share < 0.01] or runs
    best = max(usable, key=lambda r: r.throughput)
    highest = max(runs, key=lambda r: r.throughput)
    for metrics in (False, True):
        await _drained(pool, base_url)
        label = "auto (metrics)" if metrics else "auto"
        runs.append(await drive(base_url, _auto(base_url, metrics), label, seconds, pool))
    halving: list[Run] = []
    for label, make in (
        ("auto", lambda: _auto(base_url, False)),
        ("auto (metrics)", lambda: _auto(base_url, True)),
        (best.label, lambda: FixedLimit(fixed[best.label])),
    ):
        await _drained(pool, base_url)
        await _set_capacity(pool, base_url, capacity)
        halving.append(await drive(base_url, make(), label, 2 * seconds, pool, halve=max(capacity // 2, 1)))
    await _set_capacity(pool, base_url, capacity)
    return {"runs": runs, "best": best, "highest": highest, "halving": halving}


async def measure_latency_only(
    base_url: str, seconds: float, sweep: tuple[int, ...] = SWEEP
) -> dict[str, Any]:
    """The sweep and ``auto`` (both ways) against a server that shows its capacity only as latency."""
    pool = shared_pool(1024)
    runs: list[Run] = []
    for n in sweep:
        await _drained(pool, base_url)
        runs.append(await drive(base_url, FixedLimit(n), f"fixed {n}", seconds, pool))
    usable = [run for run in runs if run.failed_share < 0.01] or runs
    best = max(usable, key=lambda r: r.throughput)
    for metrics in (False, True):
        await _drained(pool, base_url)
        label = "auto (metrics)" if metrics else "auto"
        runs.append(await drive(base_url, _auto(base_url, metrics), label, seconds, pool))
    return {"runs": runs, "best": best}


def _table(runs: list[Run], best: Run, ideal: float) -> None:
    print(f"{'limit':<16}{'req/s':>8}{'of ideal':>10}{'of best':>9}{'failed':>9}{'refused':>9}{'p50 ms':>8}")
    for run in runs:
        p50 = median(run.latencies) * 1000 if run.latencies else float("nan")
        print(
            f"{run.label:<16}{run.throughput:>8.1f}{run.throughput / ideal:>10.2f}{run.throughput / best.throughput:>8.2f}x"
            f"{run.failed_share:>9.2%}{run.refused_share:>9.2%}{p50:>8.0f}"
        )


def _verdicts(runs: list[Run], best: Run, case: str) -> None:
    for run in runs:
        if not run.label.startswith("auto"):
            continue
        ratio = run.throughput / best.throughput
        met = ratio >= 0.9 and run.failed_share < 0.01
        print(
            f"{case}, {run.label}: {ratio:.2f}x the best fixed limit ({best.label}, {best.throughput:.0f} req/s), "
            f"{run.failed_share:.2%} failed: goal >= 0.9x, < 1%: {'met' if met else 'NOT met'}"
        )


def _timeline(run: Run, note: str) -> None:
    """The limit of ``run`` over time, one row per tick, and how it changed."""
    print(f"\nlimit over time, {run.label}, {note} (one # per 4 slots):")
    print(f"{'t s':>5}{'limit':>7}{'req/s':>8}")
    for at, level, answered in run.ticks:
        halved = run.halved_at is not None and abs(at - run.halved_at) < TICK / 2
        marker = "  <- capacity halved" if halved else ""
        print(f"{at:>5.0f}{level:>7}{answered / TICK:>8.0f}  {'#' * max(1, round(level / 4))}{marker}")
    if run.summary is not None:
        summary = run.summary
        print(
            f"changes: {summary['changes']}, lowest {summary['lowest']}, highest {summary['highest']}, "
            f"mean {summary['mean']}, metrics: {summary['metrics']}"
        )


def _report(results: dict[str, Any], capacity: int, latency: float, seconds: float) -> None:
    ideal = capacity / latency
    best: Run = results["best"]
    _table(results["runs"], best, ideal)
    half = max(capacity // 2, 1)
    print(
        f"\ncapacity {capacity} -> {half} after {seconds:g} s of {2 * seconds:g} s; second half against {half / latency:.0f} req/s:"
    )
    print(f"{'limit':<16}{'req/s':>8}{'of ideal':>10}{'failed':>9}{'refused':>9}  limit at the end")
    for run in results["halving"]:
        rate = run.completed_after_halving / seconds
        final = run.ticks[-1][1] if run.ticks else 0
        print(
            f"{run.label:<16}{rate:>8.1f}{rate / (half / latency):>10.2f}{run.failed_share:>9.2%}{run.refused_share:>9.2%}  {final}"
        )
    for run in results["halving"][:2]:
        _timeline(run, f"capacity {capacity} -> {half} at {seconds:g} s")
    print()
    fixed_best = best.throughput
    highest: Run = results["highest"]
    if highest is not best:
        print(
            f"best fixed limit: {best.label} (failing < 1%); the highest fixed throughput, "
            f"{highest.label}, failed {highest.failed_share:.2%} ({highest.throughput / fixed_best:.2f}x)"
        )
    _verdicts(results["runs"], best, f"429 past {2 * capacity}")
    for run in results["halving"][:2]:
        ratio = run.completed_after_halving / seconds / (half / latency)
        print(f"{run.label} after halving: {ratio:.2f}x the halved capacity, {run.failed_share:.2%} failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=32, help="requests the server serves at once")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the server takes per request")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each run")
    parser.add_argument("--latency-only", action="store_true", help="only the server refusing past 8x")
    parser.add_argument(
        "--batch-slowdown",
        type=float,
        default=0.5,
        help="the latency-only server's service time x (1 + this x others running / capacity)",
    )
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} cores)")
    print(
        f"capacity {args.capacity} (unknown to the client), service {args.latency * 1000:g} ms +- 20%, "
        f"ideal {args.capacity / args.latency:.0f} req/s; each run {args.seconds:g} s; first 429 past {2 * args.capacity}\n"
    )
    if not args.latency_only:
        with CapacityServerProcess(args.capacity, latency=args.latency) as base_url:
            results = asyncio.run(measure(base_url, args.capacity, args.seconds))
        _report(results, args.capacity, args.latency, args.seconds)
    with CapacityServerProcess(
        args.capacity, latency=args.latency, refuse_past=LATENCY_ONLY, batch_slowdown=args.batch_slowdown
    ) as base_url:
        quiet = asyncio.run(measure_latency_only(base_url, args.seconds))
    print(
        f"\nlatency only: 429 past {LATENCY_ONLY:g}x the capacity ({LATENCY_ONLY * args.capacity:g} inside), "
        f"batch slowdown {args.batch_slowdown:g} (a full batch {1 + args.batch_slowdown:g}x slower):"
    )
    _table(quiet["runs"], quiet["best"], args.capacity / args.latency)
    for run in quiet["runs"]:
        if run.label.startswith("auto"):
            _timeline(run, f"the knee at the capacity, {args.capacity}")
    _verdicts(quiet["runs"], quiet["best"], "latency only")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
