"""``benchmarks/grader_runtime.py`` runs: both scenarios on a few grades, with real worker processes."""

from __future__ import annotations

import pytest

from benchmarks.grader_runtime import hang_cut, overhead


async def test_the_benchmark_measures_both_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    await overhead(grades=20, workers=1, rounds=1)
    await hang_cut(workers=1, deadline=0.3)
    printed = capsys.readouterr().out
    assert printed.count("µs per graded rollout") == 2
    assert "a grader blocking its process, deadline 0.3 s: typed timeout at" in printed
