"""User code that calls ``sys.exit`` or raises ``KeyboardInterrupt`` ends its own item, not the run:
``osmosis test`` and ``osmosis eval`` report it as that item's ``agent_error``/``reward_error``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cli
from tests.support.datasets import mode_rows
from tests.support.openai_server import OpenAIServer, Reply

AGENT = "tests.support.agents:agent_loop"


def _data(tmp_path: Path, *modes: str) -> Path:
    return mode_rows(tmp_path / "modes.jsonl", modes)


def test_an_agent_that_exits_fails_only_its_own_row(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, "ok", "exit", "interrupt", "ok")
    out = tmp_path / "out.json"
    result = cli("test", "-m", AGENT, "-d", str(data), "--model", "m", "--base-url", openai_server.url,
                     "-o", str(out), "--max-failure-rate", "0.5")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "\n4 rows: 2 completed (50.0%), agent_error 2; mean reward 1.000 over 2 completed\n" in result.stdout
    )
    outcomes = [(r["row_index"], r["outcome"], r["error"]) for r in json.loads(out.read_text())["results"]]
    assert outcomes == [(0, "completed", None), (1, "agent_error", "SystemExit: 3"),
                        (2, "agent_error", "KeyboardInterrupt"), (3, "completed", None)]  # fmt: skip


def test_an_eval_function_that_exits_is_a_reward_error(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, "ok", "exit-eval", "interrupt-eval")
    result = cli("eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:exits",
                     "--model", "m", "--base-url", openai_server.url, "--journal", str(tmp_path / "j.sqlite"),
                     "--batch-size", "3")  # fmt: skip
    assert result.returncode == 1
    assert result.stdout.endswith("3 runs: 1 completed (33.3%), reward_error 2\n")
    assert "SystemExit: 4" in result.stdout and "KeyboardInterrupt" in result.stdout
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: 2 of 3 runs failed")
