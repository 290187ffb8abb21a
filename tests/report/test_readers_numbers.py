"""Results files with numbers JSON cannot hold as figures (``1e999``, ``NaN``, ``Infinity``) or nested
10^5 deep: read into a report, or refused in one line, never a traceback."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.report.errors import ReportInputError
from osmosis_ai.report.figures import summarize
from osmosis_ai.report.readers import parse_results
from osmosis_ai.report.render import render_report
from tests.support.cli import cli

ROLLOUT = '{{"rollout_id": "r-{i}", "row_index": {i}, "status": "COMPLETED", "reward": {reward}, "latency_ms": {latency}}}'
TEST_DOCUMENT = (
    '{"summary": {"total": 2}, "results": ['
    '{"row_index": 0, "outcome": "completed", "reward": 1e999, "duration_ms": -1e999,'
    ' "token_usage": {"prompt_tokens": 1e999, "completion_tokens": NaN}},'
    '{"row_index": 1, "outcome": "completed", "reward": 0.5, "duration_ms": 12.0,'
    ' "token_usage": {"prompt_tokens": 3, "completion_tokens": 4}}]}'
)


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_read_as_missing() -> None:
    lines = [
        ROLLOUT.format(i=0, reward="1e999", latency="Infinity"),
        ROLLOUT.format(i=1, reward="NaN", latency="-1e999"),
        ROLLOUT.format(i=2, reward="0.25", latency="7"),
    ]
    run = parse_results("\n".join(lines) + "\n", "records.jsonl")
    assert [row.score for row in run.rows] == [None, None, 0.25]
    assert [row.latency_ms for row in run.rows] == [None, None, 7.0]
    packed = re.findall(r'class="trajectories" data-run="0">([^<]+)<', render_report([run]))
    trajectories = _strict(gzip.decompress(base64.b64decode(packed[0])).decode())  # what the browser parses
    assert [t["score"] for t in trajectories] == [None, None, 0.25]
    test = parse_results(TEST_DOCUMENT, "test.json")
    summary = summarize(test, price=False)
    assert summary.mean_score is not None and summary.mean_score.value == 0.5
    assert summary.prompt_tokens == 3
    render_report([test])


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"rollout_id": "r", "row_index": 0, "status": "COMPLETED", "x": '
     + "[" * 100_000 + "]" * 100_000 + "}\n"],
    ids=["a document", "a line"],
)  # fmt: skip
def test_nesting_too_deep_is_one_line(text: str) -> None:
    with pytest.raises(ReportInputError) as caught:
        parse_results(text, "deep.json")
    assert str(caught.value).startswith("deep.json: arrays/objects nest too deeply to read; expected")


def test_the_command_reads_them_or_says_why_in_one_line(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    huge.write_text(TEST_DOCUMENT)
    ran = cli("report", str(huge), "-o", str(tmp_path / "r.html"), "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["runs"][0]["rows"] == 2
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    ran = cli("report", str(deep), "-o", str(tmp_path / "d.html"))
    assert ran.returncode == 1 and len(ran.stderr.splitlines()) == 1
    assert ran.stderr.startswith(f"Error: {deep}: arrays/objects nest too deeply to read")
