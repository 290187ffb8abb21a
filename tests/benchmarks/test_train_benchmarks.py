"""The training benchmarks run to their figure: each on two rollouts and one round, in-process beside
the other training tests (their xdist group imports torch, TRL and verl once)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("trl")


def test_the_trl_adapter_benchmark_times_both_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from benchmarks import train_adapter

    threads = (
        torch.get_num_threads()
    )  # the benchmark pins torch to one thread: the group's other tests keep theirs
    try:
        options = argparse.Namespace(rollouts=2, rounds=1, max_tokens=4)
        train_adapter.measure(options, *train_adapter.setup(options.max_tokens, tmp_path))
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "round 1: " in out and "TrainGate path vs the model's own generation of the same tokens: x" in out


def test_the_verl_agent_loop_benchmark_times_a_rollout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("verl")
    from benchmarks import train_verl

    monkeypatch.setattr(sys, "argv", ["train_verl", "--rollouts", "2", "--rounds", "1", "--concurrency", "1"])
    train_verl.main()
    assert "concurrency 1: " in capsys.readouterr().out
