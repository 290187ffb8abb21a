"""``osmosis eval-rubric`` on the run engine: ``--journal`` keeps every judgment, so a run SIGKILLed
mid-way resumes to the report of an uninterrupted one, judging only what it had not; an edited
input or another judge is refused by name until ``--fresh``; ``--retry-failed`` judges the failed ones again."""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from osmosis_ai.runs.journal import Journal
from tests.support.cli import REPO, cli, subprocess_env
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import wait_until

ROWS = 6


def _setup(tmp_path: Path, server: OpenAIServer) -> None:
    (tmp_path / "rubric_configs.yaml").write_text(
        "version: 1\ndefault_score_min: 0\ndefault_score_max: 1\nrubrics:\n  - id: tone\n"
        "    rubric: Is the reply polite?\n    model_info:\n      provider: openai\n"
        f"      model: local-judge\n      api_base: {server.url}\n      timeout: 5\n",
        encoding="utf-8",
    )
    rows = [
        {"conversation_id": f"c{i}", "rubric_id": "tone", "solution_str": f"reply {i}"} for i in range(ROWS)
    ]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def _number(payload: dict[str, Any]) -> int:
    return int(re.findall(r"reply (\d)", json.dumps(payload["messages"]))[-1])


def _verdict(payload: dict[str, Any]) -> Reply:
    """The judge's score: the answer's number, in tenths."""
    number = _number(payload)
    return Reply(content=json.dumps({"score": number / 10, "explanation": f"number {number}"}))


def _essence(report: Path) -> Any:
    """The report without its clock: each record's judgments and the statistics."""
    document = json.loads(report.read_text(encoding="utf-8"))
    runs = [
        (r["id"], [(run["run_index"], run["score"], run["outcome"], run["explanation"]) for run in r["runs"]])
        for r in document["records"]
    ]
    return runs, document["overall_statistics"], document["outcomes"]


def _judge(tmp_path: Path, home: Path, out: str, *extra: str) -> Any:
    return cli("eval-rubric", "-r", "tone", "-d", "data.jsonl", "-o", out, "--concurrency", "1", *extra,
               cwd=tmp_path, home=home)  # fmt: skip


def test_a_killed_run_resumes_to_the_report_of_an_uninterrupted_one(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    _setup(tmp_path, openai_server)
    held = threading.Event()

    def handler(payload: dict[str, Any]) -> Reply:
        reply = _verdict(payload)
        if _number(payload) == 3 and not held.is_set():
            reply = dataclasses.replace(reply, gate=held)  # the fourth judgment hangs until the run is killed
        return reply

    openai_server.handler = handler
    journal = tmp_path / "j.sqlite"
    command = [sys.executable, "-m", "osmosis_ai", "eval-rubric", "-r", "tone", "-d", "data.jsonl",
               "-o", "killed.json", "--journal", str(journal), "--concurrency", "1", "-q"]  # fmt: skip
    env = {**subprocess_env(home), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: openai_server.in_flight.now == 1 and _recorded(journal) == 3, timeout=60,
                   what="three judgments journalled and the fourth held")  # fmt: skip
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        held.set()
    assert not (tmp_path / "killed.json").exists()
    before = len(openai_server.requests)
    resumed = _judge(tmp_path, home, "killed.json", "--journal", str(journal))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("Resuming: 3 of 6 judgments already finished\nRubric 'tone' (")
    assert sorted(_number(r.json) for r in openai_server.requests[before:]) == [3, 4, 5]  # only those left
    whole = _judge(tmp_path, home, "whole.json", "--journal", str(tmp_path / "other.sqlite"))
    assert whole.returncode == 0, whole.stderr
    assert _essence(tmp_path / "killed.json") == _essence(tmp_path / "whole.json")
    assert [score for _, runs in _essence(tmp_path / "whole.json")[0] for _, score, _, _ in runs] == [
        i / 10 for i in range(ROWS)
    ]


def _recorded(journal: Path) -> int:
    info = Journal.inspect(journal) if journal.exists() else None
    return -1 if info is None else info.runs


def test_an_edited_input_is_refused_by_name_until_fresh(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    _setup(tmp_path, openai_server)
    openai_server.handler = _verdict
    journal = str(tmp_path / "j.sqlite")
    assert _judge(tmp_path, home, "a.json", "--journal", journal).returncode == 0
    again = _judge(tmp_path, home, "b.json", "--journal", journal)
    assert again.returncode == 0 and len(openai_server.requests) == ROWS  # all kept: nothing judged again
    assert _essence(tmp_path / "a.json") == _essence(tmp_path / "b.json")

    other_judge = _judge(tmp_path, home, "c.json", "--journal", journal, "--model", "openai/other-judge")
    assert other_judge.returncode == 1 and "belongs to another run: model changed" in other_judge.stderr

    data = tmp_path / "data.jsonl"
    data.write_text(data.read_text().replace("reply 5", "reply 0"))
    edited = _judge(tmp_path, home, "c.json", "--journal", journal)
    assert edited.returncode == 1
    assert edited.stderr == (
        f"Error: the journal {journal} belongs to another run: dataset changed since it was written; "
        "run with --fresh to start over (the old journal is kept as a backup)\n"
    )
    assert not (tmp_path / "c.json").exists() and len(openai_server.requests) == ROWS
    config = tmp_path / "rubric_configs.yaml"
    config.write_text(config.read_text().replace("polite", "kind"))
    refused = _judge(tmp_path, home, "c.json", "--journal", journal)
    assert refused.returncode == 1 and "belongs to another run: dataset, judge changed" in refused.stderr

    fresh = _judge(tmp_path, home, "c.json", "--journal", journal, "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert len(openai_server.requests) == 2 * ROWS
    runs = _essence(tmp_path / "c.json")[0]
    assert [score for _, judged in runs for _, score, _, _ in judged] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.0]


def test_retry_failed_judges_only_the_failed_again(
    openai_server: OpenAIServer, tmp_path: Path, home: Path
) -> None:
    _setup(tmp_path, openai_server)
    openai_server.handler = _verdict
    openai_server.queue(Reply(status=400))  # the first judgment's request is refused
    journal = str(tmp_path / "j.sqlite")
    first = _judge(tmp_path, home, "a.json", "--journal", journal, "-n", "2")
    assert first.returncode == 1 and "model_error 1" in first.stderr
    kept = _judge(tmp_path, home, "a.json", "--journal", journal, "-n", "2")
    assert kept.returncode == 1 and len(openai_server.requests) == 2 * ROWS
    assert kept.stdout.startswith(
        "Resuming: 12 of 12 judgments already finished (1 of them failed; add --retry-failed to run those again)\n"
    )
    retried = _judge(tmp_path, home, "a.json", "--journal", journal, "-n", "2", "--retry-failed")
    assert retried.returncode == 0, retried.stderr
    assert len(openai_server.requests) == 2 * ROWS + 1
    assert retried.stdout.endswith("12 judgments: 12 completed (100.0%)\n")
    runs, statistics, _ = _essence(tmp_path / "a.json")
    assert runs[0] == ("c0", [(1, 0.0, "completed", "number 0"), (2, 0.0, "completed", "number 0")])
    assert statistics["success_count"] == 12


def test_fresh_and_retry_failed_go_with_a_journal(tmp_path: Path, home: Path) -> None:
    for flag in ("--fresh", "--retry-failed"):
        result = cli("eval-rubric", "-r", "tone", "-d", "data.jsonl", flag, cwd=tmp_path, home=home)
        assert result.returncode == 1
        assert result.stderr == (
            "Error: --fresh and --retry-failed go with --journal, the run they start over or resume\n"
        )


def test_a_rate_limit_of_one_process_is_refused_on_ray(tmp_path: Path, home: Path) -> None:
    result = cli("eval-rubric", "-r", "tone", "-d", "data.jsonl", "--backend", "ray", "--requests-per-minute", "60",
                 cwd=tmp_path, home=home)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        "Error: --requests-per-minute paces one process's judge requests; drop it with --backend ray\n"
    )
