"""``benchmarks/adaptive_concurrency.py`` runs: a short sweep, ``auto`` both ways and the halving, and its report."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.adaptive_concurrency import _report, measure
from benchmarks.capacity_server import CapacityServer, capacity_server


async def test_the_benchmark_measures_every_side_and_reports_them(capsys: pytest.CaptureFixture[str]) -> None:
    tasks_before = len(asyncio.all_tasks())
    server = CapacityServer(4, latency=0.02, retry_after=0.05)
    async with capacity_server(server) as base_url:
        results = await measure(base_url, 4, 0.5, sweep=(2, 16))  # the benchmark's sides, not its figures
    assert [run.label for run in results["runs"]] == [
        "fixed 2",
        "fixed 16",
        "auto",
        "auto (metrics)",
    ]
    assert all(run.completed > 0 for run in results["runs"] + results["halving"])
    assert [run.halved_at is not None for run in results["halving"]] == [True, True, True]
    for run in results["halving"]:  # one row per second of the run
        assert [at for at, _, _ in run.ticks] == [float(n) for n in range(1, len(run.ticks) + 1)]
    assert server.slots.capacity == 4  # set back after the halving runs
    assert len(asyncio.all_tasks()) == tasks_before  # no helper task of a run outlives it
    assert results["runs"][-1].summary["metrics"]["readings"] >= 1
    _report(results, 4, 0.02, 0.5)
    out = capsys.readouterr().out
    assert "limit over time, auto, capacity 4 -> 2" in out
    assert "auto: " in out and "the best fixed limit" in out and "after halving" in out
