"""Reports of ``eval``, ``test`` and ``rollout run`` results: trajectories from ``--log-samples``, tokens,
the model, the per-row view, every eval function charted, and labels readable at their drawn size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from osmosis_ai.report.readers import read_results
from osmosis_ai.report.render import render_report
from osmosis_ai.runs.journal_report import read_journal
from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply

CALCULATOR = ("-m", "examples.calculator.agent:agent_loop", "-d", "examples/calculator/dataset.jsonl")
REWARD = "examples.calculator.reward:calculator_reward"


def test_log_samples_give_the_eval_report_its_trajectories(tmp_path: Path) -> None:
    out, structured = tmp_path / "e.json", tmp_path / "by-path"
    ran = cli("eval", *CALCULATOR, "--model", "scripted", "--eval-fn", REWARD, "--eval-fn", "tests.support.evals:turns",
              "--n", "2", "--limit", "3", "-q", "--log-samples", "-o", str(out), "--output-path", str(structured))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [samples] = structured.rglob("samples_*.jsonl")
    [results] = structured.rglob("results_*.json")
    for path in (out, results):  # -o names its samples file; --output-path's sits beside it
        run = read_results(path)
        assert len(run.rows) == 6 and all(row.trajectory.messages for row in run.rows)
        assert run.rows[0].trajectory.messages[-1]["content"] == "The answer is #### 19"
    assert read_results(samples).kind == "eval samples"  # never misread as a rollout run's records
    page = render_report([read_results(out)])
    assert 'data-score="tests.support.evals:turns"' in page  # the second eval function has its chart
    assert '<table class="per-row sortable">' in page and ">2 of 2<" in page  # solved k of n, per row


def test_eval_reports_count_tokens_and_test_and_rollout_run_files_name_the_model(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.default = Reply(content="2")
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"system_prompt": "s", "user_prompt": "q", "ground_truth": "2"}) + "\n")
    out = tmp_path / "e.json"
    ran = cli("eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "tests.support.evals:exact",
              "--model", "m", "--base-url", openai_server.url, "-q", "-o", str(out))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [row] = read_results(out).rows
    assert (row.prompt_tokens, row.completion_tokens) == (10, 5)
    records = tmp_path / "r.jsonl"
    ran = cli("rollout", "run", *CALCULATOR, "--model", "scripted", "-q", "-o", str(records),
              "--journal", str(tmp_path / "j.sqlite"))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert read_results(records).model == "scripted"  # what the report prices the tokens with
    tested = tmp_path / "t.json"
    ran = cli("test", *CALCULATOR, "--model", "scripted", "--limit", "1", "-q", "-o", str(tested))
    assert ran.returncode == 0, ran.stderr
    assert read_results(tested).model == "scripted"


@pytest.mark.parametrize("chart", ["histogram", "curve"])
def test_chart_labels_are_drawn_at_least_11_px(chart: str) -> None:
    css = (Path(__file__).resolve().parents[3] / "osmosis_ai/report/assets/report.css").read_text()
    from osmosis_ai.report import charts

    width = float(re.search(rf"svg\.{chart} {{ width: (\d+)px", css).group(1))  # type: ignore[union-attr]
    font = float(re.search(rf"svg\.{chart} text {{ font-size: (\d+)px", css).group(1))  # type: ignore[union-attr]
    assert font * width / charts.WIDTH >= 11  # the viewBox is scaled to the CSS width


def test_eval_says_where_its_results_are_and_report_reads_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "e.sqlite"
    ran = cli("eval", *CALCULATOR, "--model", "scripted", "--eval-fn", REWARD, "--n", "2", "--limit", "3",
              "--log-samples", "--journal", str(journal), "--baseline-model", "scripted")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    samples = tmp_path / "e.samples.jsonl"
    assert (
        f"\nResults kept in the journal: {journal} (osmosis report reads it)\nSamples written to: {samples}\n6 runs:"
        in ran.stdout
    )
    again = cli("eval", *CALCULATOR, "--model", "scripted", "--eval-fn", REWARD, "--n", "2", "--limit", "3",
                "--log-samples", "--journal", str(journal), "--baseline-model", "scripted",
                "--output-path", str(tmp_path / "by-path"))  # fmt: skip
    assert again.returncode == 0, again.stderr  # resumed: nothing left to run
    [results] = (tmp_path / "by-path").rglob("results_*.json")
    [copied] = (tmp_path / "by-path").rglob("samples_*.jsonl")
    assert f"\nWrote {results}\nWrote {copied}\nSamples written to: {samples}\n6 runs:" in again.stdout
    shown = cli("report", str(journal), "-o", str(tmp_path / "j.html"), "--json")
    assert shown.returncode == 0, shown.stderr
    [summary] = json.loads(shown.stdout)["runs"]
    assert (summary["kind"], summary["rows"], summary["dataset_rows"], summary["completed"]) == (
        "eval",
        6,
        3,
        6,
    )
    assert summary["comparison"][REWARD]["ties"] == 3  # the baseline, compared as eval would have
    run = read_journal(journal)
    assert run.model == "scripted" and all(
        row.trajectory.messages for row in run.rows
    )  # the samples file joined
    records = tmp_path / "r.sqlite"
    ran = cli("rollout", "run", *CALCULATOR, "--model", "scripted", "-q", "--journal", str(records))
    assert ran.returncode == 0, ran.stderr
    rollouts = read_journal(records)
    assert (rollouts.kind, len(rollouts.rows), rollouts.model) == ("rollout run", 8, "scripted")
    assert rollouts.rows[0].trajectory.messages[-1]["content"] == "The answer is #### 19"


def test_an_sqlite_file_that_is_no_journal_is_one_error_line(tmp_path: Path) -> None:
    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    ran = cli("report", str(other), "-o", str(tmp_path / "o.html"))
    assert ran.returncode == 1
    assert ran.stderr.startswith(f"Error: {other}: an SQLite file that is not a run's journal; expected")
    assert len(ran.stderr.splitlines()) == 1 and not (tmp_path / "o.html").exists()


def test_a_test_report_shows_each_rows_final_messages(tmp_path: Path) -> None:
    tested = tmp_path / "t.json"
    ran = cli("test", *CALCULATOR, "--model", "scripted", "--limit", "2", "-q", "-o", str(tested))
    assert ran.returncode == 0, ran.stderr
    run = read_results(tested)
    assert [row.trajectory.messages[-1]["content"] for row in run.rows] == ["The answer is #### 19"] * 1 + [
        "The answer is #### 27"
    ]
    assert [m["role"] for m in run.rows[0].trajectory.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_a_reward_score_journal_reads_as_reward_score(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(json.dumps({"solution_str": f"#### {n}", "ground_truth": "19"}) + "\n" for n in (19, 20))
    )
    journal = tmp_path / "r.sqlite"
    ran = cli("reward", "score", "-f", REWARD, "-d", str(answers), "--journal", str(journal), "-q")
    assert ran.returncode == 0, ran.stderr
    run = read_journal(journal)
    assert (run.kind, [row.scored_value for row in run.rows]) == ("reward score", [1.0, 0.0])
