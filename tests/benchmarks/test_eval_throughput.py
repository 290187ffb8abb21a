"""``benchmarks/eval_throughput.py`` runs: a tiny ``osmosis eval`` and a few bare LiteLLM calls against its stub."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.eval_throughput import _dataset, run_bare, run_eval
from benchmarks.openai_stub import StubProcess


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """The command configures this process's logging as an application does; later tests need it back."""
    root, rollout = logging.getLogger(), logging.getLogger("osmosis_ai.rollout")
    saved = (root.level, list(root.handlers), rollout.level)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    rollout.setLevel(saved[2])


def test_eval_throughput_measures_both_sides(tmp_path: Path, logging_restored: None) -> None:
    with StubProcess(delay=0.0) as api_base:
        wall, cpu = run_eval(api_base, _dataset(tmp_path, 3), tmp_path / "j.sqlite", n=2, batch_size=4)
        bare_wall, bare_cpu = run_bare(api_base, 4, 2)
    assert wall > 0 and cpu > 0 and bare_wall > 0 and bare_cpu > 0
