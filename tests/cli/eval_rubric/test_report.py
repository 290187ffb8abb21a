"""eval-rubric reports: baselines and their deltas, the atomically written JSON file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval_rubric.report import baseline_delta, load_baseline, write_json_atomic


def test_baseline_sources(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"overall_statistics": {"average": "0.5", "note": "x", "total_runs": 3}}))
    statistics = load_baseline(report).statistics
    assert statistics == {"average": 0.5, "total_runs": 3}
    assert isinstance(statistics["total_runs"], int)
    report.write_text(json.dumps({"records": []}))
    with pytest.raises(CLIError, match="overall_statistics"):
        load_baseline(report)
    with pytest.raises(CLIError, match="directory"):
        load_baseline(tmp_path)


def test_report_file_gets_normal_permissions(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o640
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8")) == {"a": 1}
    assert [path.name for path in tmp_path.iterdir()] == ["r.json"]


def test_baseline_counts_and_their_deltas_stay_integers(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    base = {"average": 0.5, "variance": 0.1, "stdev": 0.3, "total_runs": 4.0, "success_count": "3"}
    report.write_text(json.dumps({"overall_statistics": {**base, "failure_count": 1}}))
    baseline = load_baseline(report)
    current = {"average": 0.75, "total_runs": 6, "success_count": 6, "failure_count": 0}
    delta = baseline_delta(current, baseline)
    assert delta == {"average": 0.25, "total_runs": 2, "success_count": 3, "failure_count": -1}
    counts = ("total_runs", "success_count", "failure_count")
    assert all(type(baseline.statistics[key]) is int and type(delta[key]) is int for key in counts)
    assert json.dumps(delta) == '{"average": 0.25, "total_runs": 2, "success_count": 3, "failure_count": -1}'
