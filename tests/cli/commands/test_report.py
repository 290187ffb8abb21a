"""``osmosis report`` through the command line's ``main()`` in this process, on results files written by
``osmosis rollout run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osmosis_ai.report.figures import summarize
from osmosis_ai.report.readers import read_results
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.results import write_rollout_results, write_rubric_results


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("runs")
    return write_rollout_results(directory), write_rollout_results(
        directory, "b.jsonl", rewards=(0.0, 0.5, 1.0, 1.0)
    )


def test_report_writes_one_page_and_prints_the_summary(runs: tuple[Path, Path], tmp_path: Path) -> None:
    page = tmp_path / "out" / "report.html"
    result = cli("report", str(runs[0]), "-o", str(page))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Summary (rollout run: {runs[0]})"
    assert "8 (4 rows x 2): completed 6, agent_error 2" in result.stdout
    assert "mean reward              0.583 [" in result.stdout and "pass@2" in result.stdout
    assert lines[-1].startswith(f"Wrote {page} (") and lines[-1].endswith(" KB)")
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and 'data-figure="completed">6<' in html


def test_two_files_are_compared_and_json_is_one_object(runs: tuple[Path, Path], tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    result = cli("report", *map(str, runs), "-o", str(page), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["report"] == str(page)
    assert [(r["kind"], r["rows"], r["completed"]) for r in document["runs"]] == [("rollout run", 8, 6)] * 2
    assert round(document["runs"][1]["mean_score"]["value"], 3) == 0.5
    assert 'id="comparison-1"' in page.read_text()
    [comparison] = document["comparisons"]  # B against A, as on the page
    assert (comparison["before"], comparison["after"]) == tuple(map(str, runs))
    assert {"mean_difference", "rows_better", "rows_worse", "outcome_changes", "pass_at_k"} <= set(comparison)
    assert set(comparison["pass_at_k"]) == {"1", "2"}
    assert all(isinstance(row["row"], int) for row in comparison["changed_rows"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"score": 1}',
            "Error: {path}: a JSON object with keys score is not the output of 'osmosis rollout run -o'",
        ),
        (
            '{"row_index": 0, "status": "COMPLETED"}\nnot json\n',
            "Error: {path} line 2: not JSON (Expecting value",
        ),
    ],
)
def test_a_file_that_is_not_results_is_one_error_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "results.json"
    path.write_text(content)
    result = cli("report", str(path), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(message.format(path=path)) and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_missing_file_and_unwritable_output(runs: tuple[Path, Path], tmp_path: Path) -> None:
    missing = cli("report", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1 and missing.stderr == f"Error: {tmp_path / 'nope.jsonl'}: no such file\n"
    directory = cli("report", str(runs[0]), "-o", str(tmp_path))
    assert directory.returncode == 1
    assert directory.stderr == f"Error: cannot write -o {tmp_path}: it is a directory; give a file name\n"


# -- --report and --json on the commands that produce results ------------------------------------


def test_rollout_run_writes_its_report_and_json_summary(tmp_path: Path) -> None:
    page, records = tmp_path / "run.html", tmp_path / "records.jsonl"
    common = ("rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted")
    result = cli(*common, "-o", str(records), "--report", str(page), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # the one object is all of stdout
    assert (summary["kind"], summary["rows"], summary["completed"]) == ("rollout run", 8, 8)
    assert summary["mean_score"]["value"] == 1.0 and summary["completion_tokens"] > 0
    # Counted as rollouts ended, the object is what reading the records file back gives.
    read_back = summarize(read_results(records), price=False).to_dict()
    latency = summary.pop("latency_ms")
    assert latency == pytest.approx(read_back.pop("latency_ms"), abs=0.01)
    assert {k: summary[k] for k in read_back} == read_back
    assert 'data-figure="completed">8<' in page.read_text()
    without_records = cli(*common, "-q", "--report", str(tmp_path / "memory.html"))
    assert without_records.returncode == 0, without_records.stderr
    assert without_records.stdout.splitlines()[-1].startswith("8 rollouts: 8 completed")
    assert 'data-figure="rows">8<' in (tmp_path / "memory.html").read_text()


def test_osmosis_test_json_is_the_summary_of_its_rows(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="The answer is #### 19")
    page = tmp_path / "test.html"
    result = cli(
        "test", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "local-model", "--base-url",
        openai_server.url, "--limit", "3", "--json", "--report", str(page), "--max-failure-rate", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["kind"], summary["rows"], summary["scored"]) == ("test", 3, 3)
    assert summary["mean_score"]["value"] == 1 / 3 and summary["total_tokens"] == 45
    assert 'data-figure="rows">3<' in page.read_text()


def test_eval_json_without_output_and_eval_rubric_report(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="The answer is #### 19")
    result = cli(
        "eval", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "local-model", "--base-url",
        openai_server.url, "--eval-fn", "tests.support.evals:exact", "--n", "2", "--limit", "2", "--json",
        "--journal", str(tmp_path / "journal.sqlite"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["kind"], summary["rows"], summary["score_name"]) == (
        "eval",
        4,
        "tests.support.evals:exact",
    )
    assert sorted(summary["pass_at_k"]) == ["1", "2"]

    openai_server.default = Reply(content=json.dumps({"score": 0.75, "explanation": "fine"}))
    rubric = write_rubric_results(tmp_path, openai_server.url)
    page = tmp_path / "rubric.html"
    again = cli(
        "eval-rubric", "-r", "tone", "-d", "judged.jsonl", "-o", str(rubric), "--report", str(page), "--json",
        cwd=tmp_path, home=tmp_path / "home",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)  # the one object is all of stdout
    assert (summary["kind"], summary["rows"], summary["mean_score"]["value"]) == ("eval-rubric", 2, 0.75)
    assert 'data-figure="rows">2<' in page.read_text() and "eval-rubric" in page.read_text()


def test_two_files_are_compared_in_the_terminal_too(runs: tuple[Path, Path], tmp_path: Path) -> None:
    result = cli("report", *map(str, runs), "-o", str(tmp_path / "compare.html"))
    assert result.returncode == 0, result.stderr
    compared = result.stdout.split(f"B vs A ({runs[1]} against {runs[0]})", 1)[1]
    assert "mean difference (B - A)      -0.083 [" in compared and "over 3 rows" in compared
    assert "rows won / lost / tied by B  1 / 1 / 1" in compared
    assert "pass@2 A / B" in compared
    document = json.loads(cli("report", *map(str, runs), "-o", str(tmp_path / "c.html"), "--json").stdout)
    [comparison] = document["comparisons"]
    assert (comparison["rows_better"], comparison["rows_worse"], comparison["rows_tied"]) == (1, 1, 1)
