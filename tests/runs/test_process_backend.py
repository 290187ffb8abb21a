"""``--backend processes``: the same results, journal and output files as one process (eval, test,
reward score), its workers named in the header and the summary, and a Ctrl-C that ends them and keeps
the journal. Its deadlines and deaths (an agent holding the GIL, one that ends its process) are in
tests/cli/commands/test_agent_deadline.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.cli import REPO, cli, subprocess_env
from tests.support.journals import journalled, untimed
from tests.support.processes import alive
from tests.support.waiting import wait_until

CALCULATOR = ["-m", "examples.calculator.agent:agent_loop", "-d", str(REPO / "examples/calculator/dataset.jsonl"),
              "--model", "scripted"]  # fmt: skip
REWARD = "examples.calculator.reward:calculator_reward"


def _journalled(path: Path) -> list[tuple[Any, ...]]:
    """Every record of the journal at ``path``, its timing fields left out."""
    return [(*key, untimed(json.loads(data))) for *key, data in journalled(path)]


def test_eval_on_worker_processes_gives_the_results_and_journal_of_one_process(tmp_path: Path) -> None:
    outputs = {}
    for backend in ("local", "processes"):
        out, journal = tmp_path / f"{backend}.json", tmp_path / f"{backend}.sqlite"
        ran = cli("eval", *CALCULATOR, "--eval-fn", REWARD, "--n", "2", "--batch-size", "2", "--timeout", "60",
                  "--backend", backend, "--journal", str(journal), "-o", str(out))  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        outputs[backend] = (
            ran.stdout.splitlines(),
            untimed(json.loads(out.read_text())),
            _journalled(journal),
        )
    (local_lines, *local_files), (worker_lines, *worker_files) = outputs["local"], outputs["processes"]
    assert "Backend: 2 worker processes" in worker_lines
    assert worker_lines[-1] == local_lines[-1] + "; in 2 worker processes"
    assert worker_files == local_files
    assert len(worker_files[1]) == 16  # 8 rows, 2 samples each, each once


def test_test_on_one_worker_process_gives_the_results_of_one_process(tmp_path: Path) -> None:
    documents = {}
    for backend in ("local", "processes"):
        out = tmp_path / f"{backend}.json"
        ran = cli("test", *CALCULATOR, "--concurrency", "1", "--backend", backend, "-o", str(out))
        assert ran.returncode == 0, ran.stderr
        documents[backend] = untimed(json.loads(out.read_text()))
    lines = ran.stdout.splitlines()
    assert "Backend: 1 worker process" in lines and lines[-2].endswith("; in 1 worker process")
    assert documents["processes"] == documents["local"]


def test_reward_score_on_worker_processes_gives_the_output_of_one_process(tmp_path: Path) -> None:
    data = tmp_path / "answers.jsonl"
    data.write_text("".join(json.dumps({"solution_str": f"#### {i % 3}", "ground_truth": "1", "id": i}) + "\n"
                            for i in range(6)))  # fmt: skip
    lines = {}
    for backend in ("local", "processes"):
        out = tmp_path / f"{backend}.jsonl"
        ran = cli("reward", "score", "-f", REWARD, "-d", str(data), "--workers", "1", "--backend", backend,
                  "--journal", str(tmp_path / f"{backend}.sqlite"), "-o", str(out))  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        lines[backend] = out.read_text()
    assert "Backend: " in ran.stdout and "worker process" in ran.stdout
    assert lines["processes"] == lines["local"]
    assert [json.loads(line)["score"] for line in lines["processes"].splitlines()] == [
        float(i % 3 == 1) for i in range(6)
    ]


def test_concurrency_auto_follows_one_process_so_it_needs_a_number_with_worker_processes() -> None:
    ran = cli("test", *CALCULATOR, "--concurrency", "auto", "--backend", "processes")
    assert ran.returncode == 1
    assert ran.stderr == (
        "Error: --concurrency auto follows one process's model calls; give --concurrency N with --backend processes\n"
    )


HANGING = """
import os, time
from pathlib import Path
from osmosis_ai.rollout import RolloutAgentLoop

class Hanging(RolloutAgentLoop):
    name = "hanging"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        if ctx.request.metadata.get("mode") == "hang":
            Path("pids").write_text(f"{os.getpid()} {os.getppid()}")
            sum(range(10**15))  # one C call that holds the GIL all along
        result = await ctx.chat(list(ctx.request.messages))
        return ctx.complete([*ctx.request.messages, result.message], reward=1.0)

agent_loop = Hanging()

def one(solution_str, ground_truth, extra_info):
    return 1.0
"""


def test_ctrl_c_ends_the_worker_processes_and_keeps_the_journal(tmp_path: Path) -> None:
    from tests.support.datasets import mode_rows

    (tmp_path / "hanging.py").write_text(HANGING)
    data = mode_rows(tmp_path / "data.jsonl", ("ok", "hang"), ground_truth="1")
    journal = tmp_path / "j.sqlite"
    process = subprocess.Popen([sys.executable, "-m", "osmosis_ai", "eval", "-m", "hanging:agent_loop", "-d", str(data),
                                "--eval-fn", "hanging:one", "--model", "scripted", "--backend", "processes",
                                "--journal", str(journal)], cwd=tmp_path, env=subprocess_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        pids = tmp_path / "pids"
        wait_until(lambda: pids.exists() or process.poll() is not None, timeout=60, what="the agent to hang")
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)  # once: the run's own process is free, its agents are not in it
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    workers = [int(pid) for pid in pids.read_text().split()]
    wait_until(lambda: not any(alive(pid) for pid in workers), timeout=30, what="the worker processes to end")
    assert [(row, outcome) for row, _, _, outcome, _ in _journalled(journal)] == [(0, "completed")]
