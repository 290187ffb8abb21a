"""``benchmarks/eval_throughput.py`` runs: a tiny ``osmosis eval`` and a few bare LiteLLM calls against its stub."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.eval_throughput import _dataset, run_bare, run_eval
from benchmarks.openai_stub import StubProcess
from osmosis_ai.models.complete import FORCE_LITELLM_ENV


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """The command configures this process's logging as an application does; later tests need it back."""
    root, rollout = logging.getLogger(), logging.getLogger("osmosis_ai.rollout")
    saved = (root.level, list(root.handlers), rollout.level)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    rollout.setLevel(saved[2])


def test_eval_throughput_measures_every_side(tmp_path: Path, logging_restored: None) -> None:
    before = os.environ.get(FORCE_LITELLM_ENV)
    with StubProcess(delay=0.0) as api_base:
        for litellm in (False, True):
            journal = tmp_path / f"j-{litellm}.sqlite"
            wall, cpu = run_eval(api_base, _dataset(tmp_path, 3), journal, n=2, batch_size=4, litellm=litellm)
            assert wall > 0 and cpu > 0
        bare_wall, bare_cpu = run_bare(api_base, 4, 2)
    assert bare_wall > 0 and bare_cpu > 0
    assert os.environ.get(FORCE_LITELLM_ENV) == before  # the path is chosen for the run only
