"""``osmosis eval`` and ``osmosis rollout run --reward`` score in the reward runtime: a hung eval
function is ``reward_timeout``, a crashing reward ``reward_crash``, the other rows score, the exit
follows the failure-rate rule, and no worker process outlives the command."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.cli import CALCULATOR_DATASET, cli
from tests.support.datasets import mode_rows
from tests.support.openai_server import OpenAIServer, Reply

SCORERS = """
import os, threading

def hangs(solution_str, ground_truth, extra_info):
    if extra_info.get("mode") == "hang":
        threading.Event().wait()
    return 1.0

def crashes(solution_str, ground_truth, extra_info):
    if "3" in extra_info["user_prompt"]:
        os._exit(7)
    return 0.5
"""


def _children() -> set[int]:
    path = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    return {int(pid) for pid in path.read_text().split()} if path.exists() else set()


def test_a_hung_eval_function_is_a_reward_timeout_and_the_run_finishes(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    (tmp_path / "scorers.py").write_text(SCORERS)
    data = mode_rows(tmp_path / "d.jsonl", ["ok", "hang", "ok", "ok"])
    before = _children()
    result = cli("eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "scorers:hangs",
                 "--model", "m", "--base-url", openai_server.url, "--batch-size", "4", "--reward-timeout", "0.5", "--reward-workers", "2",
                 "--journal", str(tmp_path / "j.sqlite"), "--max-failure-rate", "0.25", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Scoring: scorers:hangs: 2 worker processes, timeout 0.5 s per sample" in result.stdout
    assert result.stdout.endswith("4 runs: 3 completed (75.0%), reward_timeout 1\n")
    assert "its worker process was killed" in result.stdout
    strict = cli("eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "scorers:hangs",
                 "--model", "m", "--base-url", openai_server.url, "--reward-timeout", "0.5",
                 "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path)  # fmt: skip
    assert strict.returncode == 1 and "1 of 4 runs failed (reward_timeout 1)" in strict.stderr
    assert _children() <= before  # every worker process ended with its command


def test_a_reward_that_kills_its_worker_fails_only_its_rollout(tmp_path: Path) -> None:
    (tmp_path / "scorers.py").write_text(SCORERS)
    out = tmp_path / "records.jsonl"
    result = cli("rollout", "run", "-m", "examples.calculator.agent:agent_loop", "-d", str(CALCULATOR_DATASET),
                 "--model", "scripted", "--reward", "scorers:crashes", "--reward-workers", "1", "-o", str(out),
                 "--journal", str(tmp_path / "j.sqlite"), "--max-failure-rate", "1", "-q", cwd=tmp_path)  # fmt: skip
    records = [json.loads(line) for line in out.read_text().splitlines()]
    crashed = [r for r in records if r["outcome"] == "reward_crash"]
    assert crashed and all("exited with status 7" in r["reward_error"] for r in crashed)
    assert all(r["reward"] == 0.5 for r in records if r["outcome"] == "completed")
    assert len(crashed) + sum(r["outcome"] == "completed" for r in records) == len(records)
    assert result.returncode == 0, result.stderr
