"""``--batch-size auto`` (eval) and ``--concurrency auto`` (rollout run) against a model server of
limited capacity the client is not told: every run completes (a refused request is retried, never
a failed run), the limit stays within its bounds, and the run says what the limit did."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.capacity_server import CapacityServer, capacity_server
from tests.support.cli import cli_async


def _data(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "2"}) + "\n"
                            for i in range(rows)))  # fmt: skip
    return path


async def test_eval_batch_size_auto_follows_the_server(tmp_path: Path) -> None:
    server = CapacityServer(4, latency=0.02, retry_after=0.05)
    async with capacity_server(server) as base_url:
        result = await cli_async(
            "eval", "-m", "tests.support.agents:agent_loop", "-d", str(_data(tmp_path, 60)), "--eval-fn",
            "tests.support.evals:exact", "--model", "m", "--base-url", base_url, "--batch-size", "auto",
            "--max-concurrency", "16", "--reward-workers", "0", "--journal", str(tmp_path / "j.sqlite"),
            "--max-failure-rate", "1",
        )  # fmt: skip
        as_json = await cli_async(
            "eval", "-m", "tests.support.agents:agent_loop", "-d", str(_data(tmp_path, 60)), "--eval-fn",
            "tests.support.evals:exact", "--model", "m", "--base-url", base_url, "--batch-size", "auto",
            "--max-concurrency", "16", "--reward-workers", "0", "--journal", str(tmp_path / "j2.sqlite"),
            "--max-failure-rate", "1", "--json",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "60 runs: 60 completed (100.0%)" in result.stdout
    line = next(line for line in result.stdout.splitlines() if line.startswith("Concurrency: auto (1-16): "))
    assert int(line.split(" to ")[1].split()[0]) <= 16
    assert server.stats.peak <= 2 * 16 and server.stats.served >= 60
    concurrency = json.loads(as_json.stdout)["concurrency"]
    assert concurrency["mode"] == "auto" and concurrency["maximum"] == 16
    assert 1 <= concurrency["lowest"] <= concurrency["highest"] <= 16 and concurrency["history"]


async def test_rollout_run_concurrency_auto_and_a_fixed_number_stays_fixed(tmp_path: Path) -> None:
    server = CapacityServer(4, latency=0.02, retry_after=0.05)
    common = ("rollout", "run", "-m", "examples.calculator.agent:agent_loop", "-d", str(_data(tmp_path, 30)),
              "--model", "m", "--base-url", "__URL__", "--max-failure-rate", "1")  # fmt: skip
    async with capacity_server(server) as base_url:
        args = [base_url if a == "__URL__" else a for a in common]
        auto = await cli_async(*args, "--concurrency", "auto", "--journal", str(tmp_path / "a.sqlite"))
        fixed = await cli_async(*args, "--concurrency", "3", "--journal", str(tmp_path / "f.sqlite"))
    assert auto.returncode == 0, auto.stderr
    assert "Concurrency: auto (1-256): " in auto.stdout and "30 rollouts: " in auto.stdout
    assert fixed.returncode == 0, fixed.stderr
    assert "Concurrency:" not in fixed.stdout
    fixed_json = await cli_async(
        *args, "--concurrency", "3", "--journal", str(tmp_path / "f.sqlite"), "--json"
    )
    assert json.loads(fixed_json.stdout)["concurrency"] == {"mode": "fixed", "limit": 3}
    bad = await cli_async(*[base_url if a == "__URL__" else a for a in common], "--concurrency", "sometimes")
    assert (
        bad.returncode == 2 and "invalid value 'sometimes': expected a whole number or 'auto'" in bad.stderr
    )


async def test_test_runs_rows_at_once_and_keeps_row_order(tmp_path: Path) -> None:
    server = CapacityServer(4, latency=0.02, retry_after=0.05)
    data = str(_data(tmp_path, 24))
    async with capacity_server(server) as base_url:
        fixed = await cli_async(
            "test", "-m", "tests.support.agents:agent_loop", "-d", data, "--model", "m", "--base-url", base_url,
            "--concurrency", "4", "-o", str(tmp_path / "fixed.json"), "--max-failure-rate", "1",
        )  # fmt: skip
        auto = await cli_async(
            "test", "-m", "tests.support.agents:agent_loop", "-d", data, "--model", "m", "--base-url", base_url,
            "--concurrency", "auto", "--max-concurrency", "8", "--json", "--max-failure-rate", "1",
        )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert server.stats.peak >= 2  # rows overlapped
    document = json.loads((tmp_path / "fixed.json").read_text())
    assert [r["row_index"] for r in document["results"]] == list(range(24))
    assert auto.returncode == 0, auto.stderr
    summary = json.loads(auto.stdout)
    assert summary["concurrency"]["mode"] == "auto" and summary["concurrency"]["highest"] <= 8


def test_interactive_refuses_a_concurrency() -> None:
    from tests.support.cli import cli

    result = cli("test", "-m", "a:b", "-d", "x.jsonl", "--model", "m", "-i", "--concurrency", "2")
    assert (
        result.returncode == 1 and "--interactive runs one row at a time: drop --concurrency" in result.stderr
    )
