"""The journal never traps: a failed preflight leaves nothing that refuses the fixed command, a
refusal names the flag that gets past it, replayed failures say how to rerun them, shards get
journals of their own, and one journal serves one run at a time."""

from __future__ import annotations

import json
import os
from pathlib import Path

from osmosis_ai.runs.journal import Journal
from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.sockets import free_port

AGENT = "tests.support.agents:agent_loop"


def _data(tmp_path: Path, rows: int = 4) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "2"}) + "\n"
                            for i in range(rows)))  # fmt: skip
    return path


def _eval(url: str, data: Path, *args: str, cwd: Path) -> tuple[int, str, str]:
    done = cli("eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:exact", "--model", "m",
                   "--base-url", url, *args, env={"OSMOSIS_CACHE_DIR": str(cwd / "cache")})  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_a_failed_preflight_does_not_trap_the_corrected_command(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    data, journal = _data(tmp_path), str(tmp_path / "j.sqlite")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    code, _, stderr = _eval(dead, data, "--journal", journal, cwd=tmp_path)
    assert code == 1 and "does not answer" in stderr
    code, stdout, stderr = _eval(openai_server.url, data, "--journal", journal, cwd=tmp_path)
    assert code == 0, stderr
    assert stdout.endswith("4 runs: 4 completed (100.0%)\n")


def test_a_refused_journal_names_fresh(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data, journal = _data(tmp_path), str(tmp_path / "j.sqlite")
    assert _eval(openai_server.url, data, "--journal", journal, cwd=tmp_path)[0] == 0
    code, _, stderr = _eval(openai_server.url, data, "--journal", journal, "--max-turns", "3", cwd=tmp_path)
    assert code == 1 and stderr.count("\n") == 1
    assert "max_turns changed since it was written; run with --fresh to start over" in stderr


def test_replayed_model_errors_say_how_to_run_them_again(openai_server: OpenAIServer, tmp_path: Path) -> None:
    data, journal = _data(tmp_path, 2), str(tmp_path / "j.sqlite")
    openai_server.queue("ok")  # the preflight
    openai_server.default = Reply(status=400)
    assert _eval(openai_server.url, data, "--journal", journal, cwd=tmp_path)[0] == 1
    openai_server.default = Reply(content="2")
    code, stdout, _ = _eval(openai_server.url, data, "--journal", journal, cwd=tmp_path)
    assert code == 1
    assert (
        "Resuming: 2 of 2 runs already finished (2 of them failed; add --retry-failed to run those again)"
        in stdout
    )
    code, stdout, _ = _eval(openai_server.url, data, "--journal", journal, "--retry-failed", cwd=tmp_path)
    assert code == 0 and stdout.endswith("2 runs: 2 completed (100.0%)\n")


def test_shards_of_one_dataset_get_journals_of_their_own(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path)
    journals = []
    for offset in ("0", "2"):
        code, stdout, stderr = _eval(
            openai_server.url, data, "--offset", offset, "--limit", "2", cwd=tmp_path
        )
        assert code == 0, stderr
        journals.append(stdout.split("; journal ", 1)[1].splitlines()[0])
    assert journals[0] != journals[1]


def test_a_journal_in_use_is_refused_naming_the_other_run(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    data, journal = _data(tmp_path), tmp_path / "j.sqlite"
    with Journal.open(journal, {"held": True}):
        code, _, stderr = _eval(openai_server.url, data, "--journal", str(journal), cwd=tmp_path)
    assert code == 1 and stderr.count("\n") == 1
    assert f"is in use by another run (pid {os.getpid()} on " in stderr and "--journal FILE" in stderr
    assert len(openai_server.requests) == 0  # refused before any model call


def test_another_n_is_another_journal_and_each_resumes(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = _data(tmp_path, 2)
    journals = {}
    for n in ("1", "2", "1"):
        code, stdout, stderr = _eval(openai_server.url, data, "--n", n, cwd=tmp_path)
        assert code == 0, stderr
        journals.setdefault(n, stdout.split("; journal ", 1)[1].splitlines()[0])
        assert stdout.split("; journal ", 1)[1].splitlines()[0] == journals[n]
    assert journals["1"] != journals["2"]
    assert "Resuming: 2 of 2 runs already finished" in stdout  # the first --n 1 run, found again
    assert len(openai_server.requests) == (1 + 2) + (1 + 4)  # preflight and runs; the third run asks nothing


def test_a_run_that_committed_nothing_leaves_no_journal_and_one_that_did_keeps_it(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    data, cache = _data(tmp_path, 2), tmp_path / "cache"
    dead = f"http://127.0.0.1:{free_port()}/v1"
    code, _, stderr = _eval(dead, data, cwd=tmp_path)  # the default journal, under the cache root
    assert code == 1 and "does not answer" in stderr
    explicit = tmp_path / "j.sqlite"
    assert _eval(dead, data, "--journal", str(explicit), cwd=tmp_path)[0] == 1
    assert not explicit.exists() and list((cache / "eval").iterdir()) == []  # nor the directories
    openai_server.queue("ok")  # the preflight; then both runs fail and are journalled as model errors
    openai_server.default = Reply(status=400)
    assert _eval(openai_server.url, data, "--journal", str(explicit), cwd=tmp_path)[0] == 1
    openai_server.queue(Reply(status=401))  # the rerun's preflight is refused
    code, _, stderr = _eval(
        openai_server.url, data, "--journal", str(explicit), "--retry-failed", cwd=tmp_path
    )
    assert code == 1 and "refused the API key" in stderr
    info = Journal.inspect(explicit)
    assert info is not None and info.runs == 2  # a journal with runs in it is never removed
