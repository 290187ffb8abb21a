"""SIGTERM, SIGHUP and SIGKILL of ``osmosis reward score`` and ``osmosis eval`` while a reward hangs
after starting processes of its own, in its worker's group and in sessions of their own: the first
two stop the command as Ctrl-C does (the journal kept, the status 128 + the signal), and after all
three no worker and no process the reward started is left."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from osmosis_ai.rewards.runtime.keeper import descendants
from osmosis_ai.runs.journal import Journal
from tests.support.cli import subprocess_env
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.processes import processes
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; the keeper is Linux's"),
    pytest.mark.timeout(120),
]

SPAWNING = """
import os, subprocess, sys, threading
from pathlib import Path

SLEEP = "import time; time.sleep(3600)"
NESTED = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {sleep!r}, sys.argv[1]], start_new_session=True); time.sleep(3600)"

def _spawn_and_hang():
    marker = os.environ["MARKER"]
    subprocess.Popen([sys.executable, "-c", SLEEP, marker])
    subprocess.Popen([sys.executable, "-c", NESTED.format(sleep=SLEEP), marker], start_new_session=True)
    Path(os.environ["STARTED"]).touch()
    threading.Event().wait()

def reward(solution_str, ground_truth, extra_info):
    if extra_info.get("mode") == "spawn":
        _spawn_and_hang()
    return float(solution_str == ground_truth)

def eval_fn(solution_str, ground_truth, extra_info):
    if ground_truth == "spawn":
        _spawn_and_hang()
    return 1.0
"""


def marked(marker: str) -> set[int]:
    found = set()
    for proc in processes():
        try:
            if marker.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                found.add(proc.pid)
        except OSError:
            continue
    return found


def _reward_score(tmp_path: Path) -> list[str]:
    rows = [
        {"solution_str": "1", "ground_truth": "1", "extra_info": {"mode": m}} for m in ("ok", "ok", "spawn")
    ]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return ["reward", "score", "-f", "spawning:reward", "-d", "d.jsonl", "--workers", "2", "--timeout", "600",
            "--journal", "j.sqlite"]  # fmt: skip


def _eval(tmp_path: Path, server: OpenAIServer) -> list[str]:
    rows = [
        {"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": truth}
        for i, truth in enumerate(("2", "spawn"))
    ]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return ["eval", "-m", "examples.calculator.agent:agent_loop", "-d", "d.jsonl", "--eval-fn", "spawning:eval_fn",
            "--model", "m", "--base-url", server.url, "--timeout", "600", "--journal", "j.sqlite"]  # fmt: skip


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
@pytest.mark.parametrize("command", ["reward score", "eval"])
def test_a_signal_leaves_no_worker_and_no_process_a_reward_started(
    openai_server: OpenAIServer, tmp_path: Path, command: str, signum: signal.Signals
) -> None:
    openai_server.default = Reply(content="2")
    (tmp_path / "spawning.py").write_text(SPAWNING)
    marker, started = f"m{uuid.uuid4().hex}", tmp_path / "started"
    args = _reward_score(tmp_path) if command == "reward score" else _eval(tmp_path, openai_server)
    env = subprocess_env(MARKER=marker, STARTED=str(started))
    env["PYTHONPATH"] += f":{tmp_path}"
    process = subprocess.Popen([sys.executable, "-m", "osmosis_ai", *args], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_until(
            lambda: len(marked(marker)) == 3 or process.poll() is not None, 60, "the reward's processes"
        )
        assert process.poll() is None, process.communicate()
        tree = set(descendants(process.pid)) | marked(marker)
        assert len(tree) >= 4  # a worker (and its keeper) and the three processes the reward started
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 128 + signum), stderr
    if signum != signal.SIGKILL:
        assert "Interrupted" in stderr and "Traceback" not in stderr
        info = Journal.inspect(tmp_path / "j.sqlite")  # consistent, readable without claiming it
        assert info is not None
    living = lambda: {p.pid for p in processes() if p.pid in tree and p.state != "Z"}  # noqa: E731
    wait_until(lambda: not living(), 20, "every process of the command's tree to be gone")
    assert not marked(marker)
