"""The short summary a run ends with (table or one JSON object) and the ``--report`` helper."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

from osmosis_ai.cli.summary import Outputs, finish_run, print_summary, show_summary, summary_rows
from osmosis_ai.report.figures import ScoreTally, outcome_counts, summarize, summary_of
from osmosis_ai.report.model import Row, Run

RUN = Run(
    "run.json",
    "test",
    [
        Row(0, 0, "completed", score=1.0, latency_ms=100.0, prompt_tokens=10, completion_tokens=5),
        Row(1, 0, "completed", score=0.0, latency_ms=300.0, prompt_tokens=10, completion_tokens=5),
        Row(2, 0, "timeout", latency_ms=900.0),
    ],
)


def test_summary_rows_name_outcomes_reward_latency_and_tokens() -> None:
    rows = dict(summary_rows(RUN, summarize(RUN)))
    assert rows["rows"] == "3: completed 2, timeout 1"
    assert rows["mean reward"].startswith("0.500 [0.000, 1.000] over 2 scored")
    assert rows["latency p50 / p90 / p99"] == "300 ms / 900 ms / 900 ms"
    assert rows["tokens"] == "30 (20 prompt, 10 completion)"


def test_a_run_without_latencies_has_no_latency_row() -> None:
    untimed = Run(
        "scores.jsonl", "reward score", [Row(0, 0, "completed", score=1.0), Row(1, 0, "reward_error")]
    )
    rows = dict(summary_rows(untimed, summarize(untimed)))
    assert "latency p50 / p90 / p99" not in rows and rows["rows"] == "2: completed 1, reward_error 1"


def test_json_summary_is_one_object_on_one_line() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        print_summary(RUN, summarize(RUN), as_json=True)
    assert out.getvalue().count("\n") == 1
    document = json.loads(out.getvalue())
    assert document["outcomes"]["timeout"] == 1 and document["latency_ms"]["p50"] == 300.0
    assert document["total_tokens"] == 30 and document["kind"] == "test"


def test_finish_run_writes_the_report_and_prints_the_json_summary(tmp_path: Path) -> None:
    document = {"summary": {}, "results": [{"row_index": 0, "outcome": "completed", "reward": 1.0}]}
    page = tmp_path / "r.html"
    out = io.StringIO()
    with redirect_stdout(out):
        finish_run(Outputs(report=str(page)), document, "in-memory")
    assert out.getvalue() == f"Wrote report to {page}\n"
    assert 'data-figure="rows">1<' in page.read_text()
    out = io.StringIO()
    with redirect_stdout(out):
        finish_run(Outputs(quiet=True, json=True), document, "in-memory")
        finish_run(Outputs(), document, "nothing asked")
    assert json.loads(out.getvalue())["mean_score"]["value"] == 1.0


def test_a_summary_from_running_counts_equals_the_summary_of_the_rows() -> None:
    rows = [
        Row(0, 0, "completed", score=1.0, latency_ms=100.0, prompt_tokens=10, completion_tokens=5),
        Row(0, 1, "completed", score=0.0, latency_ms=200.0, prompt_tokens=10, completion_tokens=5),
        Row(1, 0, "completed", score=1.0, latency_ms=300.0, prompt_tokens=10, completion_tokens=5),
        Row(1, 1, "agent_error", latency_ms=400.0),
    ]
    scores = ScoreTally()
    for row in reversed(rows):  # counted in finishing order, not dataset order
        if row.scored_value is not None:
            scores.add(row.row, row.scored_value)
    counted = summary_of(
        outcomes=outcome_counts(rows),
        scores=scores,
        samples_per_row=2,
        latencies_ms=[400.0, 300.0, 200.0, 100.0],
        prompt_tokens=30,
        completion_tokens=15,
        price=False,
        dataset_rows=2,
    )
    assert counted == summarize(Run("r.jsonl", "rollout run", rows), price=False)
    assert counted.pass_at_k and counted.mean_score is not None


def test_show_summary_prints_the_table_unless_quiet_or_json() -> None:
    document = {"summary": {}, "results": [{"row_index": 0, "outcome": "completed", "reward": 1.0}]}
    out = io.StringIO()
    with redirect_stdout(out):
        figures = show_summary(Outputs(), document, "in-memory")
        silent = show_summary(Outputs(quiet=True), document, "in-memory")
    lines = out.getvalue().splitlines()
    assert lines[0] == "Summary (test: in-memory)" and lines[1].split() == ["rows", "1:", "completed", "1"]
    assert figures is not None and figures[1].rows == 1 and silent is None


def test_samples_are_counted_beside_their_rows_and_every_score_gets_its_figures() -> None:
    rows = [
        Row(r, s, "completed", score=1.0, scores={"exact": 1.0, "half": 0.5}, latency_ms=1.0)
        for r in range(3)
        for s in range(2)
    ]
    run = Run("e.json", "eval", rows, score_name="exact")
    table = dict(summary_rows(run, summarize(run, price=False)))
    assert table["samples"] == "6 (3 rows x 2): completed 6"
    assert table["mean exact"].startswith("1.000") and table["pass@2 exact"].startswith("1.000")
    assert table["mean half"].startswith("0.500") and table["pass@1 half"].startswith("0.000")
    assert "rows" not in table
