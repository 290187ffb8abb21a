"""The fault suite's reward-runtime and signal cases (``benchmarks.chaos`` runs them and prints their rows).

1. One runtime (2 workers) scores good rows around hostile ones: a sample that writes garbage to
   every descriptor it finds (its worker's result pipe among them), one that replaces
   ``pickle.dumps``, one that closes every descriptor just after returning, one that starts
   processes in its own session and returns, one that moves the worker elsewhere and changes its
   environment. Counted: samples, outcomes, rows run more than once (a ledger the reward appends
   to), the worker processes replaced, and processes before and after (this process's descendants,
   and every process carrying the run's marker in its command line).
2. ``osmosis reward score`` as a subprocess, its reward starting processes in its worker's group
   and in sessions of their own and then hanging, is sent SIGTERM, SIGHUP or SIGKILL: the command's
   exit status, and its process tree before and after.

Goals: the garbling sample alone is ``reward_crash`` and every other row scores (the rows that
finished in its worker since the last whole frame run again, alone, to find it: reported), no row
of the others runs twice, none sees another's directory or environment, and no process is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from osmosis_ai.rewards.runtime import RewardRuntime
from osmosis_ai.rewards.runtime.keeper import descendants

REWARD = "benchmarks.chaos_runtime:hostile"
SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
SLEEPER = "import time; time.sleep(3600)"
NESTED = (
    "import subprocess, sys, time; "
    f"subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, sys.argv[1]], start_new_session=True); time.sleep(3600)"
)


def hostile(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
    """Appends the row's tag to the ledger, then does what its ``solution_str`` says."""
    with open(extra_info["ledger"], "a") as ledger:
        ledger.write(f"{ground_truth}\n")
    marker = extra_info["marker"]
    if solution_str == "garble":
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                os.write(int(fd), b"not a frame\n")
    elif solution_str == "pickle":
        import pickle

        pickle.dumps = lambda *args, **kwargs: b"junk"
    elif solution_str == "closefds":
        os.closerange(3, 1 << 16)
    elif solution_str == "spawn":
        subprocess.Popen([sys.executable, "-c", SLEEPER, marker])
        subprocess.Popen([sys.executable, "-c", NESTED, marker], start_new_session=True)
    elif solution_str == "leak":
        os.chdir("/")
        os.environ["OSMOSIS_CHAOS_LEAK"] = "1"
        return 1.0
    elif solution_str == "spawn_and_hang":
        hostile("spawn", ground_truth, extra_info)
        while True:
            time.sleep(1)
    return float(os.getcwd() == extra_info["cwd"] and "OSMOSIS_CHAOS_LEAK" not in os.environ)


def marked(marker: str) -> set[int]:
    """Processes whose command line carries ``marker``."""
    found = set()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
    return found


def living(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (not zombies)."""
    alive = set()
    for pid in pids:
        with contextlib.suppress(OSError, IndexError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.add(pid)
    return alive


def wait_gone(pids: set[int], limit: float = 20.0) -> set[int]:
    """Those of ``pids`` still running after waiting up to ``limit`` seconds for them to end."""
    deadline = time.monotonic() + limit
    while (left := living(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


async def hostile_samples(rows: int, hostile_rows: dict[int, str]) -> dict[str, Any]:
    """Case 1 of the module docstring: ``rows`` rows, ``hostile_rows`` saying which misbehave how."""
    marker = f"chaos-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory(prefix="osmosis-chaos-runtime-") as directory:
        ledger = Path(directory) / "ledger"
        extra = {"ledger": str(ledger), "marker": marker, "cwd": os.getcwd()}
        data = [
            {"solution_str": hostile_rows.get(i, "ok"), "ground_truth": str(i), "extra_info": extra}
            for i in range(rows)
        ]
        before = set(descendants(os.getpid()))
        async with RewardRuntime(REWARD, workers=2, timeout=30) as runtime:
            results = [result async for result in runtime.stream(data)]
            mine = set(descendants(os.getpid())) - before
            during = len(mine | marked(marker))
            replaced = runtime.stats.died + runtime.stats.killed
        left = wait_gone((set(descendants(os.getpid())) - before) | mine | marked(marker))
        runs = Counter(ledger.read_text().split())
    by_index = {result.index: result for result in results}
    garblers = [i for i, how in hostile_rows.items() if how == "garble"]
    return {
        "samples": rows,
        "results": len(results),
        "outcomes": dict(Counter(result.outcome.value for result in results)),
        "garblers": [by_index[i].outcome.value for i in garblers],
        "others": rows - len(garblers),
        "others_scored_1": sum(r.score == 1.0 for i, r in by_index.items() if i not in garblers),
        "ran_again": len([tag for tag, n in runs.items() if n > 1 and int(tag) not in garblers]),
        "workers_replaced": replaced,
        "processes_during": during,
        "processes_left": len(left),
    }


def signalled_command(signum: signal.Signals) -> dict[str, Any]:
    """Case 2 of the module docstring, for one signal."""
    marker = f"chaos-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory(prefix="osmosis-chaos-signal-") as directory:
        root = Path(directory)
        extra = {
            "ledger": str(root / "ledger"),
            "marker": marker,
            "cwd": directory,
        }
        modes = ["ok", "ok", "spawn_and_hang", "spawn_and_hang"]
        rows = [
            {"solution_str": mode, "ground_truth": str(i), "extra_info": extra}
            for i, mode in enumerate(modes)
        ]
        (root / "d.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        command = [sys.executable, "-m", "osmosis_ai", "reward", "score", "-f", REWARD, "-d", "d.jsonl",
                   "--workers", "2", "--timeout", "600", "--journal", "j.sqlite", "--json"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 60
            while len(marked(marker)) < 3 and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            tree = set(descendants(process.pid)) | marked(marker)
            process.send_signal(signum)
            status = process.wait(timeout=60)
        finally:
            process.kill()
            process.wait()
        left = wait_gone(tree | marked(marker))
    return {
        "signal": signum.name,
        "exit_status": status,
        "processes_before": len(tree),
        "processes_left": len(left),
    }


def run(rows: int) -> dict[str, Any]:
    garbling = {rows // 3: "garble", 2 * rows // 3: "pickle"}
    breaking = {rows // 4: "closefds", rows // 2: "spawn", 3 * rows // 4: "leak"}
    return {
        "garbling": asyncio.run(hostile_samples(rows, garbling)),
        "breaking": asyncio.run(hostile_samples(rows, breaking)),
        "signals": [signalled_command(signum) for signum in SIGNALS],
    }


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    garbling, breaking = results["garbling"], results["breaking"]
    rows = [
        (
            "a sample garbling its result pipe (+ one replacing pickle.dumps): it / the other rows scored",
            f"{', '.join(garbling['garblers'])} / {garbling['others_scored_1']}/{garbling['others']}",
            f"reward_crash / {garbling['others']}/{garbling['others']}",
        ),
        (
            "  rows run again, alone, to find the one that garbled / workers replaced",
            f"{garbling['ran_again']} / {garbling['workers_replaced']}",
            "reported",
        ),
        (
            "samples closing fds after returning, spawning a daemon, chdir + setenv: rows scored",
            f"{breaking['others_scored_1']}/{breaking['others']}",
            f"{breaking['others']}/{breaking['others']}",
        ),
        (
            "  rows run twice / workers replaced / processes during, left",
            f"{breaking['ran_again']} / {breaking['workers_replaced']} / "
            f"{breaking['processes_during']}, {garbling['processes_left'] + breaking['processes_left']}",
            "0 / reported / reported, 0",
        ),
    ]
    for case in results["signals"]:
        rows.append(
            (
                f"reward score {case['signal']}: exit status / processes before / left",
                f"{case['exit_status']} / {case['processes_before']} / {case['processes_left']}",
                f"{expected_status(case['signal'])} / reported / 0",
            )
        )
    return rows


def expected_status(name: str) -> int:
    number = signal.Signals[name]
    return -number if number == signal.SIGKILL else 128 + number


def goals_met(results: dict[str, Any]) -> bool:
    garbling, breaking = results["garbling"], results["breaking"]
    return (
        all(case["results"] == case["samples"] for case in (garbling, breaking))
        and garbling["garblers"] == ["reward_crash"]
        and garbling["others_scored_1"] == garbling["others"]
        and breaking["others_scored_1"] == breaking["others"]
        and breaking["ran_again"] == 0
        and garbling["processes_left"] == breaking["processes_left"] == 0
        and all(
            case["processes_left"] == 0 and case["exit_status"] == expected_status(case["signal"])
            for case in results["signals"]
        )
    )
