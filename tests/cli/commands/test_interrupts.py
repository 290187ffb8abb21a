"""A hung agent or eval function never hangs ``osmosis test``/``eval``: ``--timeout`` ends the row
as ``timeout``, and Ctrl-C always ends the process (at once the second time), with the journal
consistent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from osmosis_ai.runs.journal import Journal
from tests.support.cli import osmosis, subprocess_env
from tests.support.datasets import mode_rows
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import wait_until

HUNG = """
import asyncio, os, threading, time
from pathlib import Path
from osmosis_ai.rollout import RolloutAgentLoop

def _started(row):
    Path(os.environ["MARKERS"], f"started-{row}").touch()

class Hung(RolloutAgentLoop):
    name = "hung"

    def get_tools(self, request):
        if request.metadata.get("mode") == "sync-tools":
            _started(request.metadata["row_index"])
            threading.Event().wait()  # a synchronous call that never returns
        return []

    async def run(self, ctx):
        mode = ctx.request.metadata.get("mode")
        if mode in ("await", "block", "stubborn"):
            _started(ctx.request.metadata["row_index"])
        if mode == "await":
            await asyncio.Event().wait()
        if mode == "block":
            time.sleep(600)  # blocks the event loop itself
        while mode == "stubborn":  # swallows every cancellation
            try:
                await asyncio.sleep(600)
            except asyncio.CancelledError:
                pass
        result = await ctx.chat(list(ctx.request.messages))
        return ctx.complete([*ctx.request.messages, result.message], reward=1.0)

agent_loop = Hung()

def hangs(solution_str, ground_truth, extra_info):
    if extra_info.get("mode") == "eval":
        _started(extra_info["user_prompt"][1:])
        threading.Event().wait()
    return 1.0
"""


def _setup(tmp_path: Path, *modes: str) -> tuple[Path, Path]:
    (tmp_path / "hung_agent.py").write_text(HUNG)
    markers = tmp_path / "markers"
    markers.mkdir()
    return mode_rows(tmp_path / "data.jsonl", modes), markers


def test_timeout_ends_hung_rows_and_the_rest_complete(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data, markers = _setup(tmp_path, "ok", "await", "sync-tools", "ok")
    out = tmp_path / "out.json"
    result = osmosis("test", "-m", "hung_agent:agent_loop", "-d", str(data), "--model", "m", "--base-url",
                     openai_server.url, "--timeout", "2", "-o", str(out), cwd=tmp_path,
                     env={"MARKERS": str(markers)})  # fmt: skip
    assert result.returncode == 1
    assert "4 rows: 2 completed (50.0%), timeout 2" in result.stdout
    assert result.stderr.startswith("Error: 2 of 4 rows ended in an infrastructure failure (timeout 2)")
    outcomes = [r["outcome"] for r in json.loads(out.read_text())["results"]]
    assert outcomes == ["completed", "timeout", "timeout", "completed"]


def test_timeout_ends_an_agent_that_swallows_its_cancellation(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    data, markers = _setup(tmp_path, "ok", "stubborn", "ok")
    out = tmp_path / "out.json"
    # The stubborn row would hold the command for ever: it returns, its row a timeout.
    result = osmosis("test", "-m", "hung_agent:agent_loop", "-d", str(data), "--model", "m", "--base-url",
                     openai_server.url, "--timeout", "2", "-o", str(out), cwd=tmp_path,
                     env={"MARKERS": str(markers)}, timeout=90)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "3 rows: 2 completed (66.7%), timeout 1" in result.stdout
    outcomes = [r["outcome"] for r in json.loads(out.read_text())["results"]]
    assert outcomes == ["completed", "timeout", "completed"]
    assert "Traceback" not in result.stderr


def test_eval_timeout_covers_a_hung_eval_function(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    # Two at a time on two reward workers: the last row comes when both hold a hung function, which
    # must give its worker back at its item's deadline, not at the reward's own 60 s limit.
    data, markers = _setup(tmp_path, "ok", "eval", "eval", "ok")
    result = osmosis("eval", "-m", "hung_agent:agent_loop", "-d", str(data), "--eval-fn", "hung_agent:hangs",
                     "--model", "m", "--base-url", openai_server.url, "--timeout", "4", "--batch-size", "2",
                     "--reward-workers", "2", "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path,
                     env={"MARKERS": str(markers)})  # fmt: skip
    assert result.returncode == 1
    assert result.stdout.endswith("4 runs: 2 completed (50.0%), timeout 2\n")
    assert "'hung_agent:hangs' did not return within the item's time limit of 4s" in result.stdout


def _start(command: str, *args: str, tmp_path: Path, markers: Path) -> subprocess.Popen[str]:
    env = subprocess_env(MARKERS=str(markers))
    return subprocess.Popen([sys.executable, "-m", "osmosis_ai", command, *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "presses"),
    [("await", 1), ("sync-tools", 1), ("eval", 1), ("block", 1), ("block", 2)],
    ids=[
        "hung-async-agent",
        "hung-sync-get-tools",
        "hung-eval-function",
        "loop-blocked",
        "loop-blocked-twice",
    ],
)
def test_ctrl_c_ends_eval_whatever_hangs_and_keeps_the_journal(
    openai_server: OpenAIServer, tmp_path: Path, mode: str, presses: int
) -> None:
    openai_server.default = Reply(content="2")
    data, markers = _setup(tmp_path, "ok", mode)
    journal = tmp_path / "j.sqlite"
    process = _start("eval", "-m", "hung_agent:agent_loop", "-d", str(data), "--eval-fn", "hung_agent:hangs",
                     "--model", "m", "--base-url", openai_server.url, "--journal", str(journal),
                     tmp_path=tmp_path, markers=markers)  # fmt: skip
    try:
        wait_until(lambda: (markers / "started-1").exists() or process.poll() is not None, timeout=60)
        assert process.poll() is None, process.communicate()
        for press in range(presses):
            if press:  # once the first was heard, the second is Python's to handle, not the kernel's
                assert process.stderr is not None
                while "still stopping" not in process.stderr.readline():
                    pass
            process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "Interrupted" in stderr and "Traceback" not in stderr
    info = Journal.inspect(journal)  # a consistent SQLite file, readable without claiming it
    assert info is not None and info.runs == 1  # the finished run is kept, the hung one is not


def test_ctrl_c_ends_a_hung_test(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data, markers = _setup(tmp_path, "await")
    process = _start("test", "-m", "hung_agent:agent_loop", "-d", str(data), "--model", "m", "--base-url",
                     openai_server.url, tmp_path=tmp_path, markers=markers)  # fmt: skip
    try:
        wait_until(lambda: (markers / "started-0").exists() or process.poll() is not None, timeout=60)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130 and "Interrupted" in stderr and "Traceback" not in stderr
