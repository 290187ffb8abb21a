"""``--timeout`` holds whatever the agent does: an agent that blocks its event loop (``time.sleep``,
a busy loop) or ignores every cancellation and ``GeneratorExit`` ends as its row's ``timeout`` while
the other rows finish, in ``osmosis test`` and ``osmosis eval`` run as users run them. Agents that
cannot be stopped are left behind, counted, and past a bound the run stops with one line. With
``--backend processes`` an agent holding the GIL in a C call ends as ``timeout`` too (its worker process
killed), and one that ends its process fails its row alone. And a second Ctrl-C ends a command whose
user code holds the GIL in a C call (an agent, an in-process reward)."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import osmosis, subprocess_env
from tests.support.datasets import mode_rows
from tests.support.processes import alive
from tests.support.waiting import wait_until

HOSTILE = """
import asyncio, ctypes, os, time
from pathlib import Path
from osmosis_ai.rollout import RolloutAgentLoop

class Hostile(RolloutAgentLoop):
    name = "hostile"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        mode = ctx.request.metadata.get("mode")
        with open("pids", "a") as pids:  # the process running it, and that one's parent
            pids.write(f"{os.getpid()} {os.getppid()}\\n")
        if mode == "exit":
            os._exit(1)
        if mode == "gil":
            Path("started").touch()
            sum(range(10**15))  # one C call that holds the GIL all along
        if mode == "gil-idle":  # libc's sleep through PyDLL, which keeps the GIL: every thread stops, no core spins
            ctypes.PyDLL(None).sleep(3600)
        if mode == "sleep":
            time.sleep(3600)  # blocks the event loop it runs on
        while mode == "busy":  # a busy loop: never awaits
            pass
        while mode == "deaf":  # ignores cancellation and GeneratorExit alike
            try:
                await asyncio.sleep(3600)
            except BaseException:
                pass
        result = await ctx.chat(list(ctx.request.messages))
        return ctx.complete([*ctx.request.messages, result.message], reward=1.0)

agent_loop = Hostile()

def one(solution_str, ground_truth, extra_info):
    return 1.0
"""


def _dataset(tmp_path: Path, *modes: str) -> Path:
    (tmp_path / "hostile_agent.py").write_text(HOSTILE)
    return mode_rows(tmp_path / "data.jsonl", modes, ground_truth="1")


MODES = ("ok", "sleep", "ok", "busy", "ok", "deaf", "ok")
EXPECTED = ["completed", "timeout", "completed", "timeout", "completed", "timeout", "completed"]


@pytest.mark.parametrize("backend", ["local", "processes"])
def test_test_timeout_ends_agents_that_block_their_loop_or_ignore_cancellation(
    tmp_path: Path, backend: str
) -> None:
    data = _dataset(tmp_path, *MODES)
    out = tmp_path / "out.json"
    result = osmosis("test", "-m", "hostile_agent:agent_loop", "-d", str(data), "--model", "scripted",
                     "--timeout", "2", "--concurrency", "4", "-o", str(out), "--backend", backend, cwd=tmp_path,
                     timeout=60)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "7 rows: 4 completed (57.1%), timeout 3" in result.stdout
    results = json.loads(out.read_text())["results"]
    assert [r["outcome"] for r in results] == EXPECTED
    # ended by the agent's own deadline in whichever process runs it, no worker process killed
    assert {r["error"] for r in results if r["outcome"] == "timeout"} == {
        "the agent did not finish within 2s"
    }
    assert "Traceback" not in result.stderr


def test_eval_timeout_ends_agents_that_block_their_loop_or_ignore_cancellation(tmp_path: Path) -> None:
    data = _dataset(tmp_path, *MODES)
    result = osmosis("eval", "-m", "hostile_agent:agent_loop", "-d", str(data), "--eval-fn", "hostile_agent:one",
                     "--model", "scripted", "--timeout", "2", "--batch-size", "4",
                     "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, timeout=60)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stdout.endswith("7 runs: 4 completed (57.1%), timeout 3\n"), result.stdout
    assert "Traceback" not in result.stderr


def _no_worker_left(cwd: Path) -> None:
    """Every process that ran an agent of the run in ``cwd`` has ended, with its keeper."""
    pids = {int(pid) for line in (cwd / "pids").read_text().splitlines() for pid in line.split()}
    wait_until(lambda: not any(alive(pid) for pid in pids), timeout=30, what="every worker process ended")


GIL = ("ok", "gil-idle", "ok", "ok")


def test_eval_on_worker_processes_ends_an_agent_holding_the_gil_as_its_rows_timeout(tmp_path: Path) -> None:
    data = _dataset(tmp_path, *GIL)
    journal = tmp_path / "j.sqlite"
    result = osmosis("eval", "-m", "hostile_agent:agent_loop", "-d", str(data), "--eval-fn", "hostile_agent:one",
                     "--model", "scripted", "--timeout", "2", "--batch-size", "4", "--backend", "processes",
                     "--journal", str(journal), cwd=tmp_path, timeout=120)  # fmt: skip
    # Two rows to each worker: the one beside the GIL holder, held up with it, runs again alone and completes.
    assert result.returncode == 1, result.stderr
    assert "Backend: 2 worker processes" in result.stdout
    assert result.stdout.endswith("4 runs: 3 completed (75.0%), timeout 1; in 2 worker processes\n"), (
        result.stdout
    )
    assert _outcomes(journal) == {0: "completed", 1: "timeout", 2: "completed", 3: "completed"}
    assert "Traceback" not in result.stderr
    _no_worker_left(tmp_path)


def test_test_on_worker_processes_ends_an_agent_holding_the_gil_as_its_rows_timeout(tmp_path: Path) -> None:
    data = _dataset(tmp_path, *GIL)
    out = tmp_path / "out.json"
    result = osmosis("test", "-m", "hostile_agent:agent_loop", "-d", str(data), "--model", "scripted",
                     "--timeout", "2", "--concurrency", "2", "--backend", "processes", "-o", str(out),
                     cwd=tmp_path, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "4 rows: 3 completed (75.0%), timeout 1" in result.stdout
    results = json.loads(out.read_text())["results"]
    assert [r["outcome"] for r in results] == ["completed", "timeout", "completed", "completed"]
    assert "worker process was killed" in results[1]["error"]
    assert "Traceback" not in result.stderr
    _no_worker_left(tmp_path)


def test_an_agent_that_ends_its_worker_process_fails_its_row_alone(tmp_path: Path) -> None:
    data = _dataset(tmp_path, "ok", "exit", "ok", "ok")
    journal = tmp_path / "j.sqlite"
    result = osmosis("eval", "-m", "hostile_agent:agent_loop", "-d", str(data), "--eval-fn", "hostile_agent:one",
                     "--model", "scripted", "--batch-size", "2", "--backend", "processes",
                     "--journal", str(journal), cwd=tmp_path, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stdout.endswith("4 runs: 3 completed (75.0%), infra_error 1; in 2 worker processes\n"), (
        result.stdout
    )
    assert _outcomes(journal) == {0: "completed", 1: "infra_error", 2: "completed", 3: "completed"}
    records = _records(journal)
    assert len(records) == 4  # one each: none lost, none counted twice
    assert "its worker process exited with status 1 while running it" in records[1]
    assert "Traceback" not in result.stderr
    _no_worker_left(tmp_path)


def _records(journal: Path) -> dict[int, str]:
    """Each row's journal record (its data), by row."""
    with contextlib.closing(sqlite3.connect(journal)) as connection:
        rows = connection.execute("SELECT row_index, data FROM samples ORDER BY row_index").fetchall()
    assert len({row for row, _ in rows}) == len(rows), rows
    return dict(rows)


def _outcomes(journal: Path) -> dict[int, str]:
    with contextlib.closing(sqlite3.connect(journal)) as connection:
        return dict(
            connection.execute("SELECT row_index, outcome FROM samples ORDER BY row_index").fetchall()
        )


@pytest.mark.parametrize("mode", ["sleep", "deaf"])
def test_agents_left_running_past_the_bound_stop_the_run_with_one_line(tmp_path: Path, mode: str) -> None:
    from osmosis_ai.runs.executors.local import MAX_ABANDONED_AGENTS

    # Each agent is abandoned 3 s after it starts (its limit, then a grace to cancel and one to close):
    # half the bound at once passes it in the second round, the first round's agents still running.
    # Rows enough that some never start: at the stop, the bound's agents ended and the others in flight.
    concurrency = MAX_ABANDONED_AGENTS // 2 + 1
    rows = MAX_ABANDONED_AGENTS + 2 * concurrency
    data = _dataset(tmp_path, *[mode] * rows)
    out = tmp_path / "out.json"
    result = osmosis("test", "-m", "hostile_agent:agent_loop", "-d", str(data), "--model", "scripted",
                     "--timeout", "1", "--concurrency", str(concurrency), "-o", str(out), cwd=tmp_path,
                     timeout=60)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "still running after their time limit" in line]
    assert len(lines) == 1, result.stderr
    assert f"{MAX_ABANDONED_AGENTS + 1} agents" in lines[0]
    outcomes = [r["outcome"] for r in json.loads(out.read_text())["results"]]
    assert len(outcomes) < rows and set(outcomes) == {"timeout"}, outcomes


def _pending(pid: int, signum: int) -> bool:
    """Whether ``signum`` waits for delivery to process ``pid`` (Linux's /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:  # it has ended
        return False
    for line in status.splitlines():
        if line.startswith("ShdPnd:"):
            return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    return False


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's part of the rule is Linux's")
@pytest.mark.parametrize("timeout", [None, "600"], ids=["on-the-run-loop", "on-a-loop-thread"])
def test_a_second_ctrl_c_ends_the_command_while_the_agent_holds_the_gil(
    tmp_path: Path, timeout: str | None
) -> None:
    data = _dataset(tmp_path, "ok", "gil")
    limit = ["--timeout", timeout] if timeout else []
    _press_twice_while_the_gil_is_held(tmp_path, "eval", "-m", "hostile_agent:agent_loop", "-d", str(data),
                                       "--eval-fn", "hostile_agent:one", "--model", "scripted",
                                       "--journal", str(tmp_path / "j.sqlite"), *limit)  # fmt: skip


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's part of the rule is Linux's")
def test_a_second_ctrl_c_ends_reward_score_while_an_in_process_reward_holds_the_gil(tmp_path: Path) -> None:
    (tmp_path / "holding.py").write_text(
        "from pathlib import Path\n"
        "def hold(solution_str, ground_truth, extra_info):\n"
        "    Path('started').touch()\n"
        "    sum(range(10**15))  # one C call that holds the GIL all along\n"
        "    return 1.0\n"
    )
    data = tmp_path / "answers.jsonl"
    data.write_text(json.dumps({"solution_str": "a", "ground_truth": "a"}) + "\n")
    _press_twice_while_the_gil_is_held(tmp_path, "reward", "score", "-f", "holding:hold", "-d", str(data),
                                       "--workers", "0", "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip


def _press_twice_while_the_gil_is_held(cwd: Path, *args: str) -> None:
    """``osmosis *args`` whose user code touches ``started`` and then holds the GIL: two Ctrl-C end it."""
    process = subprocess.Popen([sys.executable, "-m", "osmosis_ai", *args], cwd=cwd, env=subprocess_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_until(lambda: (cwd / "started").exists() or process.poll() is not None, timeout=60)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        # Delivered before the next is sent: two signals pending at once are one.
        wait_until(lambda: not _pending(process.pid, signal.SIGINT), timeout=60)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    # The kernel ended it at the second (Python never ran); or Python heard the first before the C
    # call began, and its watchdog (faulthandler's C thread) ended it (1) unless Python could (130).
    assert process.returncode in (-signal.SIGINT, 1, 130), stderr
    assert "Traceback" not in stderr
