"""``osmosis rollout run``'s journal, through the command line's ``main()``: a run killed mid-way (a
subprocess, SIGKILLed) resumes to the result of an uninterrupted one, repeating no finished rollout; a
changed dataset is refused; ``--fresh`` and Ctrl-C (a subprocess, SIGINTed); ``osmosis eval cache``
lists and removes the journal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.cli import REPO, Ran, assert_summary_table_matches, cli, subprocess_env
from tests.support.waiting import wait_until

# Appends "<row> <sample>" to calls.txt (in the working directory) each time it runs a rollout, so
# a test counts what ran; ``mode`` "fail" raises (an agent_error), anything else calls the model once.
COUNTING_AGENT = """
import asyncio
import os

from osmosis_ai.rollout import RolloutAgentLoop


class Counting(RolloutAgentLoop):
    name = "counting"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        metadata = ctx.request.metadata
        with open("calls.txt", "a") as calls:
            calls.write(f"{metadata['row_index']} {metadata['sample_index']}\\n")
        await asyncio.sleep(float(os.environ.get("AGENT_DELAY", "0")))
        if metadata.get("mode") == "fail":
            raise RuntimeError("the agent broke on purpose")
        result = await ctx.chat(list(ctx.request.messages))
        return ctx.complete([*ctx.request.messages, result.message], reward=float(metadata["row_index"] % 3))


agent_loop = Counting()
"""


def _setup(tmp_path: Path, rows: int, *, fail_every: int = 0) -> Path:
    (tmp_path / "counting.py").write_text(COUNTING_AGENT)
    data = tmp_path / "data.jsonl"
    modes = ["fail" if fail_every and i % fail_every == fail_every - 1 else "ok" for i in range(rows)]
    data.write_text("".join(
        json.dumps({"system_prompt": "s", "user_prompt": f"What is {i} + 1?", "ground_truth": str(i + 1),
                    "mode": mode}) + "\n"
        for i, mode in enumerate(modes)
    ))  # fmt: skip
    return data


def _command(data: Path, journal: str, *extra: str) -> list[str]:
    return ["rollout", "run", "-m", "counting:agent_loop", "-d", str(data), "--model", "scripted",
            "--journal", journal, *extra]  # fmt: skip


def _run(tmp_path: Path, command: list[str], **env: str) -> Ran:
    return cli(*command, cwd=tmp_path, env=env)


def _process(tmp_path: Path, command: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """The command in a process of its own, for a test that signals it."""
    env = {**subprocess_env(**kwargs.pop("env", {})), "PYTHONPATH": f"{tmp_path}:{REPO}"}
    return subprocess.Popen([sys.executable, "-m", "osmosis_ai", *command], cwd=tmp_path, env=env, text=True,
                            **kwargs)  # fmt: skip


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def _essentials(path: Path) -> list[tuple[Any, ...]]:
    """What must not depend on an interruption: each record's place, outcome, status and reward."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["row_index"], r["sample_index"], r["outcome"], r["status"], r["reward"],
             r["final_messages"]) for r in records]  # fmt: skip


def test_killed_with_sigkill_and_resumed_gives_the_uninterrupted_result(tmp_path: Path) -> None:
    data = _setup(tmp_path, 12, fail_every=5)
    flags = ["--n", "2", "--concurrency", "3", "--max-failure-rate", "0.5", "-q"]
    whole = _run(tmp_path, _command(data, "whole.sqlite", *flags, "-o", "whole.jsonl"))
    assert whole.returncode == 0, whole.stderr
    (tmp_path / "calls.txt").unlink()

    command = _command(data, "resumed.sqlite", *flags, "-o", "resumed.jsonl")
    victim = _process(tmp_path, command, env={"AGENT_DELAY": "0.05"}, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: len(_calls(tmp_path)) >= 10, timeout=60, what="ten rollouts started")
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    before = len(_calls(tmp_path))
    assert before < 24  # it really died mid-run

    resumed = _run(tmp_path, [c for c in command if c != "-q"], COLUMNS="200")  # with the resume line
    assert resumed.returncode == 0, resumed.stderr
    assert _essentials(tmp_path / "resumed.jsonl") == _essentials(tmp_path / "whole.jsonl")
    # The outcome line of the uninterrupted run, and a closing table that counts every rollout:
    # the one reading the whole records file gives.
    assert_summary_table_matches(resumed.stdout, tmp_path / "resumed.jsonl", whole.stdout.strip())
    # No finished rollout ran again: what the rerun ran is exactly what the journal did not have.
    rerun = _calls(tmp_path)[before:]
    finished = 24 - len(rerun)
    assert len(set(rerun)) == len(rerun) and finished > 0
    # Rows 4 and 9 fail on purpose: those of them already finished are kept, and the line says so.
    kept = sum(f"{row} {sample}" not in rerun for row in (4, 9) for sample in (0, 1))
    failures = f" ({kept} of them failed; {kept} agent_error{'' if kept == 1 else 's'} {'is' if kept == 1 else 'are'} kept: fix the agent and run with --fresh)"
    journaled = [line for line in resumed.stdout.splitlines() if line.startswith("Resuming:")]
    assert journaled == [
        f"Resuming: {finished} of 24 rollouts already finished{failures if kept else ''} "
        f"(journal {tmp_path / 'resumed.sqlite'})"
    ]


def test_a_finished_run_rerun_runs_nothing_and_reports_the_same_outcome(tmp_path: Path) -> None:
    data = _setup(tmp_path, 3)
    first = _run(tmp_path, _command(data, "j.sqlite"), COLUMNS="200")
    assert first.returncode == 0, first.stderr
    again = _run(tmp_path, _command(data, "j.sqlite"), COLUMNS="200")
    assert again.returncode == 0, again.stderr
    assert len(_calls(tmp_path)) == 3  # the rerun asked the agent nothing
    assert "none run (every rollout read from the journal)" in again.stdout
    assert again.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]


def test_a_changed_dataset_is_refused_and_fresh_starts_over_keeping_the_old_journal(tmp_path: Path) -> None:
    data = _setup(tmp_path, 2)
    assert _run(tmp_path, _command(data, "j.sqlite", "-q")).returncode == 0
    data.write_text(data.read_text().replace("What is 0", "What is 5"))
    refused = _run(tmp_path, _command(data, "j.sqlite", "-q"))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith(
        f"Error: the journal {tmp_path / 'j.sqlite'} belongs to another run: dataset changed"
    )
    assert len(_calls(tmp_path)) == 2  # nothing ran
    fresh = _run(tmp_path, _command(data, "j.sqlite", "-q", "--fresh"))
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout == "2 rollouts: 2 completed (100.0%); mean reward 0.500 over 2 completed\n"
    assert len(_calls(tmp_path)) == 4 and len(list(tmp_path.glob("j.sqlite.*.bak"))) == 1


def test_ctrl_c_keeps_what_finished_and_says_how_to_resume(tmp_path: Path) -> None:
    data = _setup(tmp_path, 8)
    command = _command(data, "j.sqlite", "--concurrency", "2", "-q", "-o", "records.jsonl")
    process = _process(tmp_path, command, env={"AGENT_DELAY": "0.2"}, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)  # fmt: skip
    wait_until(lambda: len(_calls(tmp_path)) >= 4, timeout=60, what="four rollouts started")
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130 and stdout == ""
    assert stderr == (
        "Interrupted: the finished rollouts are kept in the journal; run the same command again to resume.\n"
    )
    before = len(_calls(tmp_path))
    resumed = _run(tmp_path, command)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "8 rollouts: 8 completed (100.0%); mean reward 0.875 over 8 completed\n"
    assert len(_calls(tmp_path)) - before < 8  # what had finished was kept
    order = [(r[0], r[1]) for r in _essentials(tmp_path / "records.jsonl")]
    assert order == [(row, 0) for row in range(8)]


def test_the_default_journal_is_listed_and_removed_by_eval_cache(tmp_path: Path) -> None:
    data = _setup(tmp_path, 1)
    command = _command(data, "unused")[:-2]  # no --journal: the default, under $OSMOSIS_CACHE_DIR
    assert _run(tmp_path, [*command, "-q"]).returncode == 0
    listing = _run(tmp_path, ["eval", "cache", "ls"])
    task_id, model, dataset, status, runs, _created = listing.stdout.strip().split("\t")
    assert task_id.startswith("rollout-") and (model, dataset, status, runs) == (
        "scripted",
        str(data),
        "completed",
        "1",
    )
    again = _run(tmp_path, [*command, "-q"])
    assert again.returncode == 0 and len(_calls(tmp_path)) == 1  # resumed from that journal: nothing ran
    removed = _run(tmp_path, ["eval", "cache", "rm", task_id])
    assert removed.stdout == "Removed 1 journal(s).\n"
    assert _run(tmp_path, [*command, "-q"]).returncode == 0 and len(_calls(tmp_path)) == 2


async def test_a_url_server_is_not_fingerprinted_and_a_resume_says_so(tmp_path: Path) -> None:
    from tests.support.cli import cli_async
    from tests.support.rollout_server import Callback, StandInRolloutServer

    async def answer(init: dict[str, Any], callback: Callback) -> None:
        _status, reply = await callback("/v1/chat/completions", {"messages": init["messages"],
                                                                 "rollout_id": init["rollout_id"]})  # fmt: skip
        final = [*init["messages"], reply["choices"][0]["message"]]
        await callback("/v1/rollout/completed", {"rollout_id": init["rollout_id"], "status": "COMPLETED",
                                                 "final_messages": final, "reward": 1.0})  # fmt: skip

    data = _setup(tmp_path, 2)

    async def run(server_url: str) -> tuple[int | None, str]:
        command = [*_command(data, "j.sqlite")[:2], "--url", server_url, *_command(data, "j.sqlite")[4:]]
        result = await cli_async(*command, cwd=tmp_path)
        return result.returncode, result.stdout

    async with StandInRolloutServer(script=answer) as server:
        first = await run(server.url)
        second = await run(server.url)
    assert first[0] == second[0] == 0
    assert "Note:" not in first[1] and len(server.inits) == 2  # the second run ran nothing
    assert f"Note: the code behind --url {server.url} cannot be fingerprinted" in second[1]


def test_offset_and_limit_run_a_shard_with_a_journal_of_its_own(tmp_path: Path) -> None:
    data = _setup(tmp_path, 4)
    cache = tmp_path / "cache"
    command = [
        "rollout",
        "run",
        "-m",
        "counting:agent_loop",
        "-d",
        str(data),
        "--model",
        "scripted",
        "--n",
        "2",
    ]

    def shard(out: str, *rows: str) -> list[tuple[int, int]]:
        ran = _run(tmp_path, [*command, *rows, "-o", str(tmp_path / out)], OSMOSIS_CACHE_DIR=str(cache))
        assert ran.returncode == 0, ran.stderr
        return [(r["row_index"], r["sample_index"]) for r in map(json.loads, (tmp_path / out).open())]

    assert shard("a.jsonl", "--offset", "1", "--limit", "2") == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert shard("b.jsonl", "--offset", "3") == [(3, 0), (3, 1)]
    assert sorted(_calls(tmp_path)) == ["1 0", "1 1", "2 0", "2 1", "3 0", "3 1"]
    assert len(list(cache.rglob("*.sqlite"))) == 2  # one journal per selection of rows
    # Rerun, the first shard comes from its journal, written to -o in dataset order from row 1.
    assert shard("again.jsonl", "--offset", "1", "--limit", "2") == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert len(_calls(tmp_path)) == 6
