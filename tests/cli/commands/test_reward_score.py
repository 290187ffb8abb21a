"""``osmosis reward score``: a dataset of answers scored in real worker processes, on the run engine.

Every row ends in its typed outcome (a hung reward ``reward_timeout``, one that kills its worker
``reward_crash``, a row without its answer ``reward_error`` saying so), the output is in row order,
an interrupted run resumes to the same output, and no worker process outlives the command."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from osmosis_ai.report.readers import read_results
from tests.support.cli import cli
from tests.support.processes import children

SCORERS = """
import contextlib, os, signal, sqlite3, threading, time

def exact(solution_str, ground_truth, extra_info):
    mode = extra_info.get("mode")
    if mode == "hang":
        threading.Event().wait()
    if mode == "crash":
        os._exit(3)
    return float(solution_str == ground_truth)

def interrupting(solution_str, ground_truth, extra_info):
    # Once, at the row marked: wait for the rows before it to be committed, then Ctrl-C the command.
    if extra_info.get("mode") == "interrupt" and not os.path.exists(os.environ["MARK"]):
        open(os.environ["MARK"], "w").close()
        while True:
            with contextlib.closing(sqlite3.connect(os.environ["JOURNAL"])) as db:
                if db.execute("SELECT count(*) FROM samples").fetchone()[0] >= extra_info["after"]:
                    break
            time.sleep(0.01)
        os.kill(int(os.environ["COMMAND_PID"]), signal.SIGINT)
        threading.Event().wait()
    return float(solution_str == ground_truth)
"""


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _score(tmp_path: Path, *args: str) -> Any:
    return cli("reward", "score", "-f", "scorers:exact", "--workers", "1", *args, cwd=tmp_path)


def test_jsonl_parquet_and_csv_score_in_row_order_with_the_columns_mapped(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "scorers.py").write_text(SCORERS)
    answers = [("4", "4", {"k": 0}), ("5", "4", {"k": 1}), ("7", "7", {"k": 2})]
    jsonl = _write_jsonl(tmp_path / "a.jsonl", [
        {"solution_str": s, "ground_truth": t, "extra_info": e, "id": i} for i, (s, t, e) in enumerate(answers)
    ])  # fmt: skip
    parquet = tmp_path / "a.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"answer": s, "truth": t, "meta": e} for s, t, e in answers]), parquet
    )
    csv_file = tmp_path / "a.csv"
    with csv_file.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["answer", "truth", "meta"])
        writer.writerows([s, t, json.dumps(e)] for s, t, e in answers)
    mapped = ("--solution-column", "answer", "--ground-truth-column", "truth", "--extra-info-column", "meta")
    for dataset, columns in ((jsonl, ()), (parquet, mapped), (csv_file, mapped)):
        out = tmp_path / f"{dataset.suffix[1:]}.out.jsonl"
        result = _score(tmp_path, "-d", str(dataset), *columns, "-o", str(out), "--max-failure-rate", "0")
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-2] == "3 rows: 3 completed (100.0%)"
        lines = _lines(out)
        assert [(line["row_index"], line["score"], line["outcome"], line["error"]) for line in lines] == [
            (0, 1.0, "completed", None), (1, 0.0, "completed", None), (2, 1.0, "completed", None)
        ]  # fmt: skip
        if dataset is jsonl:
            assert lines[1] | {"row_index": 1} == {"row_index": 1, "score": 0.0, "outcome": "completed",
                "error": None, "solution_str": "5", "ground_truth": "4", "extra_info": {"k": 1}, "id": 1}  # fmt: skip
        else:  # the row's own fields as the file holds them
            assert lines[2]["answer"] == "7" and lines[2]["meta"] in ({"k": 2}, '{"k": 2}')
    run = read_results(tmp_path / "jsonl.out.jsonl")  # the report tells the output by its content
    assert run.kind == "reward score" and [row.score for row in run.rows] == [1.0, 0.0, 1.0]


def test_a_hang_a_crash_and_a_row_without_its_answer_end_typed_and_the_run_finishes(tmp_path: Path) -> None:
    (tmp_path / "scorers.py").write_text(SCORERS)
    modes = ["ok", "hang", "ok", "crash", "ok"]
    rows: list[dict[str, Any]] = [
        {"solution_str": "1", "ground_truth": "1", "extra_info": {"mode": m}} for m in modes
    ]
    rows.insert(2, {"answer": "1", "ground_truth": "1"})
    data = _write_jsonl(tmp_path / "d.jsonl", rows)
    journal, out = tmp_path / "j.sqlite", tmp_path / "out.jsonl"
    before = children()
    result = cli("reward", "score", "-f", "scorers:exact", "-d", str(data), "--timeout", "0.5", "--workers", "2",
                 "--journal", str(journal), "-o", str(out), "--report", str(tmp_path / "r.html"), cwd=tmp_path)  # fmt: skip
    assert children() <= before  # every worker process ended with the command
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        "3 of 6 rows failed (reward_error 1, reward_timeout 1, reward_crash 1): failure rate 50.0% is above "
        "--max-failure-rate 0.0%"
    )
    outcomes = {line["row_index"]: (line["outcome"], line["error"]) for line in _lines(out)}
    assert outcomes[2] == (
        "reward_error",
        "row 2 has no column 'solution_str' (its columns: 'answer', 'ground_truth')",
    )
    assert outcomes[1][0] == "reward_timeout" and "0.5 s timeout" in outcomes[1][1]
    assert outcomes[4][0] == "reward_crash" and "exited with status 3" in outcomes[4][1]
    assert [outcomes[i][0] for i in (0, 3, 5)] == ["completed"] * 3
    assert "Failed rows" in result.stdout and "reward_timeout" in result.stdout
    assert "latency" not in result.stdout  # nothing is timed: no row of dashes
    assert "reward score" in (tmp_path / "r.html").read_text()

    # Run again with --json: nothing left to score, the same figures as one JSON object, the rule's exit.
    again = cli("reward", "score", "-f", "scorers:exact", "-d", str(data), "--journal", str(journal), "--json",
                "--max-failure-rate", "0.5", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["kind"] == "reward score" and summary["scored"] == 3
    assert {k: v for k, v in summary["outcomes"].items() if v} == {
        "completed": 3, "reward_error": 1, "reward_timeout": 1, "reward_crash": 1
    }  # fmt: skip
    assert [f["row_index"] for f in summary["failures"]] == [1, 2, 4]
    assert summary["distribution"] == [{"low": 1.0, "high": 1.0, "rows": 3}]
    # The resume line counts the failures the summary counts, and says which --retry-failed runs again.
    resumed = cli("reward", "score", "-f", "scorers:exact", "-d", str(data), "--journal", str(journal),
                  "--max-failure-rate", "0.5", cwd=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "Resuming: 6 of 6 rows already finished (3 of them failed; add --retry-failed to run 2 of them again; "
        "1 reward_error is kept: fix the reward and run with --fresh)\n"
    ) in resumed.stdout


def test_an_interrupted_run_resumes_to_the_output_of_an_uninterrupted_one(tmp_path: Path) -> None:
    (tmp_path / "scorers.py").write_text(SCORERS)
    rows = [{"solution_str": str(i % 2), "ground_truth": "1", "extra_info": {"i": i}} for i in range(6)]
    rows[3]["extra_info"] |= {"mode": "interrupt", "after": 3}
    data = _write_jsonl(tmp_path / "d.jsonl", rows)
    journal = tmp_path / "j.sqlite"
    env = {"MARK": str(tmp_path / "interrupted"), "JOURNAL": str(journal), "COMMAND_PID": str(os.getpid())}
    before = children()

    def run(out: Path, journal: Path) -> Any:
        return cli("reward", "score", "-f", "scorers:interrupting", "-d", str(data), "--workers", "1",
                   "--journal", str(journal), "-o", str(out), "--max-failure-rate", "0", cwd=tmp_path, env=env)  # fmt: skip

    stopped = run(tmp_path / "stopped.jsonl", journal)
    assert stopped.returncode == 130, stopped.stderr
    assert "the finished rows are kept in the journal" in stopped.stderr
    assert not (tmp_path / "stopped.jsonl").exists()
    resumed = run(tmp_path / "resumed.jsonl", journal)
    assert resumed.returncode == 0, resumed.stderr
    assert "Resuming: 3 of 6 rows already finished" in resumed.stdout
    whole = run(tmp_path / "whole.jsonl", tmp_path / "other.sqlite")
    assert whole.returncode == 0, whole.stderr
    assert (tmp_path / "resumed.jsonl").read_text() == (tmp_path / "whole.jsonl").read_text()
    assert children() <= before


def test_a_dataset_whose_first_row_has_no_answer_column_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "scorers.py").write_text(SCORERS)
    data = _write_jsonl(tmp_path / "d.jsonl", [{"answer": "1", "ground_truth": "1"}])
    result = _score(tmp_path, "-d", str(data), "--journal", str(tmp_path / "j.sqlite"))
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {data}: row 0 has no column 'solution_str' (its columns: 'answer', 'ground_truth'); name the "
        "columns with --solution-column, --ground-truth-column and --extra-info-column\n"
    )
    assert not (tmp_path / "j.sqlite").exists()


def test_an_empty_dataset_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "scorers.py").write_text(SCORERS)
    data = _write_jsonl(tmp_path / "d.jsonl", [])
    result = _score(tmp_path, "-d", str(data), "--journal", str(tmp_path / "j.sqlite"))
    assert result.returncode == 1
    assert result.stderr == f"Error: {data}: no rows to run\n"
    assert not (tmp_path / "j.sqlite").exists()


def test_a_reward_whose_machinery_fails_is_an_infrastructure_failure_never_a_zero(tmp_path: Path) -> None:
    (tmp_path / "machinery.py").write_text(
        "from osmosis_ai.errors import InfrastructureError\n\n"
        "def reward(solution_str, ground_truth, extra_info):\n"
        "    if extra_info.get('down'):\n"
        "        raise InfrastructureError('the sandbox could not run the code: no user namespaces')\n"
        "    return 1.0\n"
    )
    rows = [{"solution_str": "a", "ground_truth": "a", "extra_info": {"down": d}} for d in (False, True)]
    data, out = _write_jsonl(tmp_path / "d.jsonl", rows), tmp_path / "out.jsonl"
    result = cli("reward", "score", "-f", "machinery:reward", "-d", str(data), "--workers", "1",
                 "--journal", str(tmp_path / "j.sqlite"), "-o", str(out), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1
    assert "infrastructure failure" in result.stderr
    lines = {line["row_index"]: line for line in _lines(out)}
    assert lines[1]["outcome"] == "infra_error" and lines[1]["score"] is None
    assert "no user namespaces" in lines[1]["error"]
    assert (lines[0]["outcome"], lines[0]["score"]) == ("completed", 1.0)
