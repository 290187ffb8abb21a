"""Per-model summaries count failures without scoring them; a baseline is compared row by row, never blended."""

from __future__ import annotations

import pytest

from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.journal import BASELINE, SampleRecord
from osmosis_ai.runs.summary import compare, legacy_document, summarize

FN = "evals:exact"


def _record(row: int, run: int, score: float | None, tag: str = "primary") -> SampleRecord:
    if score is None:
        return SampleRecord(row, run, Outcome.MODEL_ERROR, {"error": "boom", "scores": {}}, tag)
    data = {"scores": {FN: score}, "duration_ms": 10.0, "token_usage": {"total_tokens": 5}}
    return SampleRecord(row, run, Outcome.COMPLETED, data, tag)


def test_failed_samples_are_counted_not_scored() -> None:
    records = [_record(0, 0, 1.0), _record(0, 1, None), _record(1, 0, 0.0), _record(1, 1, 1.0)]
    summary = summarize(records, [FN], model="m")
    figures = summary.eval_fns[FN]
    assert figures is not None
    assert figures.mean.value == pytest.approx((1.0 + 0.5) / 2)  # row means, the failure left out
    assert figures.runs == 3 and summary.counts[Outcome.MODEL_ERROR] == 1
    assert sorted(figures.pass_at_k) == [1]  # row 0 has one scored sample
    assert summary.total_tokens == 15
    assert summarize([_record(0, 0, None)], [FN], model="m").eval_fns[FN] is None


def test_the_comparison_uses_only_rows_both_models_completed() -> None:
    primary = [_record(0, 0, 1.0), _record(1, 0, 1.0), _record(2, 0, 0.0)]
    baseline = [_record(0, 0, 0.0, BASELINE), _record(1, 0, None, BASELINE), _record(2, 0, 0.0, BASELINE)]
    comparison = compare(primary, baseline, [FN])
    estimate = comparison.differences[FN]
    assert estimate is not None and estimate.value == pytest.approx(0.5) and comparison.rows[FN] == 2
    document = legacy_document(
        {"model": "m"},
        summarize(primary, [FN], model="m"),
        primary + baseline,
        baseline=summarize(baseline, [FN], model="b", model_tag=BASELINE),
        comparison=comparison,
    )
    assert document["summary"]["eval_fns"][FN]["mean"] == pytest.approx(2 / 3)
    assert document["baseline_summary"]["eval_fns"][FN]["mean"] == 0.0
    assert document["rows"][1]["runs"][1] == {
        "run_index": 0, "success": False, "scores": {}, "duration_ms": 0.0, "tokens": 0,
        "outcome": "model_error", "model_tag": "baseline", "error": "boom",
    }  # fmt: skip
