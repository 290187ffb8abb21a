"""Reports of ``eval``, ``test`` and ``rollout run`` results: trajectories from ``--log-samples``, tokens,
the model, the per-row view, every eval function charted, and labels readable at their drawn size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from osmosis_ai.report.readers import read_results
from osmosis_ai.report.render import render_report
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
