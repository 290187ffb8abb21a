"""``osmosis eval`` as a subprocess against the local OpenAI-compatible stand-in: scores, pass@k, the journal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import osmosis
from tests.support.openai_server import OpenAIServer, Reply

AGENT = "tests.support.agents:agent_loop"


def _data(tmp_path: Path, truths: list[str], mode: str = "ok") -> Path:
    path = tmp_path / "data.jsonl"
    rows = [
        {"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": t, "mode": mode}
        for i, t in enumerate(truths)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _eval(url: str, data: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return osmosis(
        "eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:exact", "--model", "m",
        "--base-url", url, "--journal", str(tmp_path / "journal.sqlite"), *args,
    )  # fmt: skip


def test_scores_pass_at_k_and_resume(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, ["2", "3", "2", "5"])
    out = tmp_path / "report.json"
    result = _eval(openai_server.url, data, tmp_path, "--n", "3", "--batch-size", "4",
                   "--eval-fn", "tests.support.evals:turns", "-o", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "tests.support.evals:exact: mean 0.500 [" in result.stdout
    assert "  pass@3: 0.500 [" in result.stdout
    assert result.stdout.endswith("12 runs: 12 completed (100.0%)\n")
    document = json.loads(out.read_text())
    summary = document["summary"]["eval_fns"]["tests.support.evals:exact"]
    assert summary["pass_at_1"] == 0.5 and summary["rows"] == 4 and summary["runs"] == 12
    assert document["summary"]["eval_fns"]["tests.support.evals:turns"]["mean"] == 3.0
    assert sum(len(row["runs"]) for row in document["rows"]) == 12
    assert len(openai_server.requests) == 13  # preflight + 12 runs
    again = _eval(
        openai_server.url, data, tmp_path, "--n", "3", "--eval-fn", "tests.support.evals:turns", "-q"
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "12 runs: 12 completed (100.0%)\n"
    assert len(openai_server.requests) == 13  # everything was in the journal: nothing ran again


def test_a_changed_dataset_is_refused_and_fresh_starts_over(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, ["2"])
    assert _eval(openai_server.url, data, tmp_path, "-q").returncode == 0
    data.write_text(data.read_text().replace('"2"', '"3"'))
    result = _eval(openai_server.url, data, tmp_path, "-q")
    assert result.returncode == 1 and "dataset changed since it was written" in result.stderr
    before = len(openai_server.requests)
    result = _eval(openai_server.url, data, tmp_path, "--fresh")
    assert result.returncode == 0, result.stderr  # a score of 0 is a score: the run completed
    assert "tests.support.evals:exact: mean 0.000" in result.stdout
    assert len(openai_server.requests) == before + 2  # preflight and the run, again
    assert len(list(tmp_path.glob("journal.sqlite.*.bak"))) == 1


def test_a_systemic_failure_stops_the_run_and_a_rerun_finishes_it(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    data = _data(tmp_path, ["2", "2", "2"])
    openai_server.queue("preflight ok", "2")
    openai_server.default = Reply(status=401)
    result = _eval(openai_server.url, data, tmp_path, "-q")
    assert result.returncode == 1
    assert result.stdout == "1 run: 1 completed (100.0%); 2 of 3 not run\n"
    assert result.stderr.startswith(
        "Error: the run stopped: model 'm' cannot be used: the provider refused the API key"
    )
    openai_server.reset()
    openai_server.default = Reply(content="2")
    result = _eval(openai_server.url, data, tmp_path, "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 runs: 3 completed (100.0%)\n"
    assert len(openai_server.requests) == 3  # preflight + the two runs that were missing


@pytest.mark.parametrize(("mode", "outcome"), [("break-eval", "reward_error"), ("skip", "no_model_calls")])
def test_failed_runs_are_counted_not_scored(
    openai_server: OpenAIServer, tmp_path: Path, mode: str, outcome: str
) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, ["2", "2"], mode=mode)
    out = tmp_path / "r.json"
    result = osmosis(
        "eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:broken", "--model", "m",
        "--base-url", openai_server.url, "--journal", str(tmp_path / "j.sqlite"), "-q", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == f"2 runs: 0 completed (0.0%), {outcome} 2\n"
    assert result.stderr == f"Error: all 2 runs failed ({outcome} 2)\n"
    document = json.loads(out.read_text())
    assert document["summary"]["eval_fns"]["tests.support.evals:broken"] is None  # no score at all, not 0


def test_killed_with_sigkill_and_resumed_gives_the_uninterrupted_result(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    import random
    import signal
    import sys
    import time

    from tests.support.cli import REPO, subprocess_env

    truths = [str(i % 3) for i in range(10)]
    data = _data(tmp_path, truths)
    openai_server.handler = lambda payload: Reply(
        content=str(len(payload["messages"][1]["content"]) % 3), delay=0.02
    )

    def command(journal: str, report: str) -> list[str]:
        return [
            sys.executable, "-m", "osmosis_ai", "eval", "-m", AGENT, "-d", str(data), "--eval-fn",
            "tests.support.evals:exact", "--model", "m", "--base-url", openai_server.url, "--n", "2",
            "--batch-size", "3", "--journal", str(tmp_path / journal), "-q", "-o", str(tmp_path / report),
        ]  # fmt: skip

    whole = subprocess.run(
        command("whole.sqlite", "whole.json"),
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert whole.returncode == 0, whole.stderr
    openai_server.reset()
    openai_server.handler = lambda payload: Reply(
        content=str(len(payload["messages"][1]["content"]) % 3), delay=0.02
    )
    kill_at = random.Random(7).randrange(3, 18)
    victim = subprocess.Popen(command("resumed.sqlite", "resumed.json"), cwd=REPO, env=subprocess_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while len(openai_server.requests) < kill_at and time.monotonic() < deadline and victim.poll() is None:
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert not (tmp_path / "resumed.json").exists()  # it really died mid-run
    resumed = subprocess.run(
        command("resumed.sqlite", "resumed.json"),
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr

    def essentials(name: str) -> list[tuple[int, int, str, dict[str, float]]]:
        rows = json.loads((tmp_path / name).read_text())["rows"]
        return sorted(
            (row["row_index"], r["run_index"], r["outcome"], r["scores"]) for row in rows for r in row["runs"]
        )

    assert essentials("resumed.json") == essentials("whole.json")
    whole_report = json.loads((tmp_path / "whole.json").read_text())["summary"]["eval_fns"]
    resumed_report = json.loads((tmp_path / "resumed.json").read_text())["summary"]["eval_fns"]
    assert resumed_report == whole_report
