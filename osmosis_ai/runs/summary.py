"""What an evaluation reports: one summary per model and, with a baseline, a paired comparison.

Only ``completed`` samples carry scores; the others are counted by outcome and never scored 0.
Per eval function a model's summary gives the mean score (the mean of the per-row means, with a
bootstrap interval over rows), the spread of the sample scores and the unbiased pass@k for every
``k`` up to the fewest completed samples of any row (a sample passes when its score is at least the
pass threshold); each larger ``k`` up to the most samples a row has is named as missing, with the
number of rows short of it. A baseline model gets a summary of its own; the two are compared only
row by row, over the rows where both have a completed sample (:func:`compare`: the paired difference
and the rows won, lost and tied), never by blending their runs.

:func:`legacy_document` lays this out as the ``-o`` JSON file (``config``/``summary``/``rows``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean, pstdev
from typing import TYPE_CHECKING, Any

from osmosis_ai.outcome import Outcome, OutcomeCounts
from osmosis_ai.runs.journal import BASELINE, PRIMARY, SampleRecord
from osmosis_ai.statistics import (
    Estimate,
    WinLossTie,
    bootstrap_means,
    paired_difference,
    pass_at_k_by_row,
    pass_at_k_gap_text,
    pass_at_k_gaps,
)

if TYPE_CHECKING:
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.run import RunEnd


@dataclass(frozen=True)
class FnSummary:
    """One eval function's figures for one model, over its completed samples."""

    mean: Estimate
    std: float
    low: float
    high: float
    pass_at_k: dict[int, Estimate]
    rows: int
    runs: int
    pass_at_k_gaps: dict[int, int] = field(default_factory=dict)
    """``k`` -> rows with fewer than ``k`` completed samples, for the ``k`` not in ``pass_at_k``."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"mean": self.mean.value, "std": self.std, "min": self.low, "max": self.high}
        data.update({f"pass_at_{k}": e.value for k, e in self.pass_at_k.items()})
        data["mean_interval"] = [self.mean.low, self.mean.high]
        data["pass_at_k_interval"] = {str(k): [e.low, e.high] for k, e in self.pass_at_k.items()}
        if self.pass_at_k_gaps:  # beside 0.2's keys: a missing pass_at_<k> says why it is missing
            data["pass_at_k_missing"] = {
                str(k): pass_at_k_gap_text(k, n) for k, n in self.pass_at_k_gaps.items()
            }
        data["rows"], data["runs"] = self.rows, self.runs
        return data


@dataclass(frozen=True)
class ModelSummary:
    """One model's runs: outcome counts, totals and per-function figures (None: nothing completed)."""

    model: str
    model_tag: str
    counts: OutcomeCounts
    eval_fns: dict[str, FnSummary | None]
    total_tokens: int
    total_duration_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "model_tag": self.model_tag,
            "eval_fns": {name: s.to_dict() if s else None for name, s in self.eval_fns.items()},
            "total_runs": self.counts.total,
            "total_tokens": self.total_tokens,
            "total_duration_ms": round(self.total_duration_ms, 3),
            "outcomes": self.counts.to_dict(),
        }


@dataclass(frozen=True)
class Comparison:
    """Primary minus baseline, per eval function: the mean per-row difference and its interval, and
    the rows the primary model won, lost and tied (its row mean above, below, equal to the baseline's)."""

    differences: dict[str, Estimate | None] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    records: dict[str, WinLossTie] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            name: None
            if e is None
            else {
                "difference": e.value,
                "interval": [e.low, e.high],
                "rows": self.rows[name],
                **self.records[name].to_dict(),
            }
            for name, e in self.differences.items()
        }


def scores_by_row(records: Iterable[SampleRecord], name: str) -> dict[int, list[float]]:
    """The completed samples' scores of eval function ``name``, grouped by row."""
    by_row: dict[int, list[float]] = {}
    for record in records:
        if record.outcome is Outcome.COMPLETED:
            by_row.setdefault(record.row_index, []).append(float(record.data["scores"][name]))
    return by_row


def _fn_summary(
    by_row: Mapping[int, Sequence[float]], pass_threshold: float, samples_per_row: int
) -> FnSummary | None:
    if not by_row:
        return None
    everything = [score for scores in by_row.values() for score in scores]
    passes = [[score >= pass_threshold for score in scores] for scores in by_row.values()]
    # The mean and every pass@k in one resampling: the same draws of rows, and half the end-of-run cost.
    ks = range(1, min(len(samples) for samples in passes) + 1)
    columns = [[fmean(scores) for scores in by_row.values()], *(pass_at_k_by_row(passes, k) for k in ks)]
    mean, *pass_at_k = bootstrap_means(columns)
    return FnSummary(
        mean=mean,
        std=pstdev(everything),
        low=min(everything),
        high=max(everything),
        pass_at_k=dict(zip(ks, pass_at_k, strict=True)),
        rows=len(by_row),
        runs=len(everything),
        pass_at_k_gaps=pass_at_k_gaps([len(samples) for samples in passes], samples_per_row),
    )


def summarize(
    records: Sequence[SampleRecord],
    eval_fn_names: Sequence[str],
    *,
    model: str,
    model_tag: str = PRIMARY,
    pass_threshold: float = 1.0,
) -> ModelSummary:
    """The summary of one model's ``records`` (see the module docstring)."""
    samples = Counter(r.row_index for r in records)
    most = max(samples.values(), default=0)
    return ModelSummary(
        model=model,
        model_tag=model_tag,
        counts=OutcomeCounts.of(r.outcome for r in records),
        eval_fns={
            name: _fn_summary(scores_by_row(records, name), pass_threshold, most) for name in eval_fn_names
        },
        total_tokens=sum(int(r.data.get("token_usage", {}).get("total_tokens", 0)) for r in records),
        total_duration_ms=sum(float(r.data.get("duration_ms", 0.0)) for r in records),
    )


def compare(
    primary: Sequence[SampleRecord], baseline: Sequence[SampleRecord], eval_fn_names: Sequence[str]
) -> Comparison:
    """Primary minus baseline over the rows where both have a completed sample, per eval function."""
    comparison = Comparison()
    for name in eval_fn_names:
        first, second = scores_by_row(primary, name), scores_by_row(baseline, name)
        shared = sorted(first.keys() & second.keys())
        comparison.rows[name] = len(shared)
        means = [fmean(first[r]) for r in shared], [fmean(second[r]) for r in shared]
        comparison.differences[name] = paired_difference(*means) if shared else None
        comparison.records[name] = WinLossTie.of(a - b for a, b in zip(*means, strict=True))
    return comparison


def run_entry(record: SampleRecord) -> dict[str, Any]:
    """One run in the ``-o`` file: 0.2's keys, plus the outcome and the eval functions' errors."""
    data = record.data
    entry: dict[str, Any] = {
        "run_index": record.sample_index,
        "success": record.outcome is Outcome.COMPLETED,
        "scores": data.get("scores", {}),
        "duration_ms": data.get("duration_ms", 0.0),
        "tokens": data.get("token_usage", {}).get("total_tokens", 0),
        "outcome": record.outcome.value,
    }
    if data.get("token_usage"):  # the split the report shows and prices; 0.2 had the total only
        entry["token_usage"] = data["token_usage"]
    if record.model_tag == BASELINE:
        entry["model_tag"] = BASELINE
    if data.get("error"):
        entry["error"] = data["error"]
    if data.get("eval_errors"):
        entry["eval_errors"] = data["eval_errors"]
    return entry


def _row_entry(index: int, records: list[SampleRecord]) -> dict[str, Any]:
    """One row of the ``-o`` file: its runs, and the dataset row they ran on (for a regrade)."""
    entry: dict[str, Any] = {
        "row_index": index,
        "runs": [
            run_entry(r) for r in sorted(records, key=lambda r: (r.sample_index, r.model_tag != PRIMARY))
        ],
    }
    given = next(
        (r.data["input_record"] for r in records if isinstance(r.data.get("input_record"), dict)), None
    )
    if given is not None:
        entry["input_record"] = given
    return entry


def legacy_document(
    config: Mapping[str, Any],
    primary: ModelSummary,
    records: Iterable[SampleRecord],
    *,
    baseline: ModelSummary | None = None,
    comparison: Comparison | None = None,
) -> dict[str, Any]:
    """The ``-o`` file: ``config``, the primary model's ``summary``, ``rows`` sorted by index (each
    with its runs and its dataset row as ``input_record``); a baseline adds ``baseline_summary`` and
    ``comparison`` beside them."""
    rows: dict[int, list[SampleRecord]] = {}
    for record in records:
        rows.setdefault(record.row_index, []).append(record)
    document: dict[str, Any] = {
        "config": dict(config),
        "summary": primary.to_dict(),
        "rows": [_row_entry(index, rows[index]) for index in sorted(rows)],
    }
    if baseline is not None:
        document["baseline_summary"] = baseline.to_dict()
    if comparison is not None:
        document["comparison"] = comparison.to_dict()
    return document


@dataclass
class EvalResults:
    """An eval run's results: each model's summary, the paired comparison with a baseline, and the
    ``-o`` document (:func:`legacy_document`) over every model's ``records``."""

    primary: ModelSummary
    baseline: ModelSummary | None
    comparison: Comparison | None
    document: dict[str, Any]
    records: list[SampleRecord]


def eval_results(end: RunEnd, names: Sequence[str], config: Mapping[str, Any]) -> EvalResults:
    """The results of the run that ended as ``end``, scored by the eval functions ``names``;
    ``config`` is the ``-o`` file's (its ``model``, ``pass_threshold`` and any ``baseline_model``)."""
    records, threshold = end.records, config["pass_threshold"]
    primary = summarize(records[PRIMARY], names, model=config["model"], pass_threshold=threshold)
    baseline = comparison = None
    if BASELINE in records:
        baseline = summarize(records[BASELINE], names, model=config["baseline_model"], model_tag=BASELINE,
                             pass_threshold=threshold)  # fmt: skip
        comparison = compare(records[PRIMARY], records[BASELINE], names)
    everything = [r for tag_records in records.values() for r in tag_records]
    document = legacy_document(config, primary, everything, baseline=baseline, comparison=comparison)
    return EvalResults(primary, baseline, comparison, document, everything)


def structured_document(
    results: EvalResults, end: RunEnd, config: Mapping[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """The ``--output-path`` results document of a completed run (``config`` its own, fuller one)
    and the samples kept beside the journal, if any."""
    from osmosis_ai.runs.journal import read_samples

    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    structured = {"version": 1, "task_id": end.task_id, "status": end.status, "written_at": now,
                  "config": dict(config), **{k: v for k, v in results.document.items() if k != "config"},
                  "runs": [{"row_index": r.row_index, **run_entry(r)} for r in results.records]}  # fmt: skip
    path = end.samples_path
    return structured, read_samples(path) if path is not None and path.exists() else None


def test_document(
    results: list[Result], *, stop: str | None, model: str, run: Mapping[str, Any]
) -> dict[str, Any]:
    """``osmosis test``'s ``-o`` document: the summary of ``results``, each result (in row order)
    with its final messages, the ``model`` and the ``run`` member; ``stop`` says why the run stopped
    early, if it did."""
    results = sorted(results, key=lambda r: r.item.row_index)
    counts = OutcomeCounts.of(r.outcome for r in results)
    return {
        "summary": {
            "total": counts.total,
            "passed": counts.completed,
            "failed": counts.failed,
            "total_duration_ms": round(sum(r.attempt.duration_ms for r in results), 3),
            "total_tokens": sum(r.attempt.tokens for r in results),
            "retried_calls": sum(r.attempt.retries for r in results),
            "outcomes": counts.to_dict(),
            "stopped_early": stop is not None,
            "stop_reason": stop,
        },
        "results": [{**r.record(), "final_messages": r.attempt.final_messages} for r in results],
        "model": model,
        "run": dict(run),
    }
