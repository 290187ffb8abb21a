"""``benchmarks/eval_throughput.py`` runs: a tiny ``osmosis eval`` and a few bare LiteLLM calls against its stub."""

from __future__ import annotations

from pathlib import Path

from benchmarks.eval_throughput import _dataset, run_bare, run_eval
from benchmarks.openai_stub import StubProcess


def test_eval_throughput_measures_both_sides(tmp_path: Path) -> None:
    with StubProcess(delay=0.0) as api_base:
        wall, cpu = run_eval(api_base, _dataset(tmp_path, 3), tmp_path / "j.sqlite", n=2, batch_size=4)
        bare_wall, bare_cpu = run_bare(api_base, 4, 2)
    assert wall > 0 and cpu > 0 and bare_wall > 0 and bare_cpu > 0
