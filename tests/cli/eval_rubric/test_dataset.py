"""Rubric datasets: every line validated, errors naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval_rubric.dataset import load_records


def test_dataset_validation_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"rubric_id": "A", "solution_str": "x"}\n\n{"rubric_id": "b", "solution_str": " "}\n')
    with pytest.raises(CLIError, match=r"d.jsonl:3: 'solution_str'"):
        load_records(path, "a")
    path.write_text('{"rubric_id": "A", "solution_str": "x", "score_min": "0"}\n')
    with pytest.raises(CLIError, match=r"d\.jsonl:1: 'score_min' must be a number"):
        load_records(path, "a")
    path.write_text('{"rubric_id": "A", "solution_str": "x", "score_max": Infinity}\n')
    with pytest.raises(CLIError, match=r"d\.jsonl:1: 'score_max' must be a finite number"):
        load_records(path, "a")
    path.write_text('{"rubric_id": "A", "solution_str": "x"}\n{"rubric_id": 3, "solution_str": "y"}\n')
    assert [record.line_number for record in load_records(path, "a")] == [1]


def test_unreadable_lines_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.json"  # read as JSONL whatever the suffix
    path.write_text('{"rubric_id": "a", "solution_str": "x"}\n\n{oops\n')
    with pytest.raises(CLIError, match=r"d\.json:3: invalid JSON: Expecting property name"):
        load_records(path, "a")
    path.write_bytes(b'{"rubric_id": "a", "solution_str": "x"}\n{"solution_str": "\xe9"}\n')
    with pytest.raises(CLIError, match=r"d\.json:2: invalid JSON: 'utf-8' codec can't decode"):
        load_records(path, "a")
    path.write_text('{"rubric_id": "a", "solution_str": "x"}\n[1]\n')
    with pytest.raises(CLIError, match=r"d\.json:2: expected a JSON object, got list"):
        load_records(path, "a")
