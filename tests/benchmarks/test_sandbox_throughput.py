"""The sandbox throughput benchmark runs both ways to the end, every run passing (the figure itself
is the benchmark's to report, not a test's)."""

from __future__ import annotations

import shutil

import pytest

from benchmarks import sandbox_throughput


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_both_ways_run_the_solution_and_pass() -> None:
    blocks = await sandbox_throughput.measure(runs=4, rounds=2)
    assert set(blocks) == {"fresh sandbox per run", "SandboxPool"}
    assert all(len(measured) == 2 and all(rate > 0 for rate, _ in measured) for measured in blocks.values())
    assert len(sandbox_throughput.SOLUTION.splitlines()) == 30 and len(sandbox_throughput.TESTS) == 5
