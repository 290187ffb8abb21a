"""``benchmarks/reward_runtime.py`` runs: each scenario on a few rows, with real worker processes."""

from __future__ import annotations

from benchmarks.reward_runtime import BUSY, TRIVIAL, _rows, busy, compare, hung, trivial


async def test_the_benchmark_measures_every_side() -> None:
    for spec, fn in ((BUSY, busy), (TRIVIAL, trivial)):
        figures = await compare(spec, fn, _rows(20), workers=2, rounds=1, threaded=fn is trivial)
        assert all(figures[side] > 0 for side in ("loop", "inprocess", "pool", "start"))
    assert figures["threaded"] > 0
    stall = await hung(20, workers=2, timeout=0.5)
    assert stall["cut"] >= 0.5 and stall["wall"] > 0 and stall["without"] > 0
