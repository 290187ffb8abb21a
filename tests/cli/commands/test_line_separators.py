"""U+2028, U+2029 and U+0085 in a dataset's text travel unescaped into ``rollout run -o``'s JSON lines;
the report reads such a file, and ``rollout run --report`` succeeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osmosis_ai.report.readers import parse_results
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli

SEPARATORS = ("\u2028", "\u2029", "\u0085")


def _dataset(tmp_path: Path) -> Path:
    rows = [json.loads(line) for line in CALCULATOR_DATASET.read_text().split("\n")[:3]]
    for row, separator in zip(rows, SEPARATORS, strict=True):
        row["system_prompt"] += f" one line{separator}and the next"
        row["note"] = f"a{separator}b"
    path = tmp_path / "separators.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def test_rollout_records_with_line_separators_are_read_by_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records, page = tmp_path / "out.jsonl", tmp_path / "run.html"
    ran = cli("rollout", "run", "-m", CALCULATOR, "-d", str(_dataset(tmp_path)),
                      "--model", "scripted", "-o", str(records), "--report", str(page), "-q")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "3 rollouts: 3 completed (100.0%); mean reward 1.000 over 3 completed\n"
    text = records.read_text(encoding="utf-8")
    assert all(separator in text for separator in SEPARATORS)  # written as they are, unescaped
    again = cli("report", str(records), "-o", str(tmp_path / "again.html"), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["runs"][0]["rows"] == 3


def test_a_json_lines_file_splits_at_newlines_only() -> None:
    lines = [
        {"rollout_id": f"r-{i}", "row_index": i, "status": "COMPLETED", "error_message": f"x{s}y"}
        for i, s in enumerate(SEPARATORS)
    ]
    text = "\r\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n\n"
    run = parse_results(text, "records.jsonl")
    assert [row.row for row in run.rows] == [0, 1, 2]
