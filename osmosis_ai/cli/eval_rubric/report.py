"""``eval-rubric`` reports: each record's judgments read back from the run's records
(:func:`results_of`), the text report for the terminal, the JSON report file, baselines.

The JSON report is written by the one output writer (:mod:`osmosis_ai.cli.output_file`): a regular
file is replaced atomically, so an interrupted run never leaves a half-written report behind.
"""

from __future__ import annotations

import json
import math
import statistics as stats
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import one_line
from osmosis_ai.cli.output_file import OutputPathError, check_output, write_output
from osmosis_ai.judge.rubric import RubricConfig, RubricRecord
from osmosis_ai.outcome import Outcome, OutcomeCounts
from osmosis_ai.runs.judging import JUDGMENT

COMPARED_KEYS = ("average", "variance", "stdev", "min", "max", "success_count", "failure_count", "total_runs")
_COUNT_KEYS = frozenset({"success_count", "failure_count", "total_runs"})


@dataclass
class EvaluationRun:
    """One judgment of one record, as the report shows it."""

    run_index: int
    status: str
    score: float | None
    explanation: str | None
    preview: str | None
    duration_seconds: float
    started_at: datetime
    completed_at: datetime
    error: str | None = None
    raw: Any = None
    outcome: Outcome = Outcome.COMPLETED
    cached: bool = False


@dataclass
class RecordResult:
    """A record, where it sits in the selection (from 1), and its judgments in order."""

    record: RubricRecord
    record_index: int
    label: str
    record_id: str
    runs: list[EvaluationRun] = field(default_factory=list)


def scores_of(runs: list[EvaluationRun]) -> list[float]:
    """The scores of the successful runs (a success without a numeric score does not count)."""
    return [run.score for run in runs if run.status == "success" and run.score is not None]


def compute_statistics(runs: list[EvaluationRun]) -> dict[str, Any]:
    """Mean, population variance/stdev, min, max of the successful scores, plus run counts."""
    scores = scores_of(runs)
    summary: dict[str, Any] = {"average": 0.0, "variance": 0.0, "stdev": 0.0, "min": 0.0, "max": 0.0}
    if scores:
        variance = stats.pvariance(scores)
        summary.update(average=stats.fmean(scores), variance=variance, stdev=math.sqrt(variance),
                       min=min(scores), max=max(scores))  # fmt: skip
    summary.update(total_runs=len(runs), success_count=len(scores), failure_count=len(runs) - len(scores))
    return summary


def _identity(record: RubricRecord, position: int) -> tuple[str, str]:
    label = record.conversation_id or f"record[{position}]"
    raw_id = record.payload.get("id")
    if isinstance(raw_id, str) and raw_id.strip():
        return label, raw_id.strip()
    return label, label if raw_id is None or isinstance(raw_id, str) else str(raw_id)


def _run_of(sample: int, data: Mapping[str, Any]) -> EvaluationRun:
    """A judgment from its record (:data:`~osmosis_ai.runs.judging.JUDGMENT` has the judge's details)."""
    judged = data.get(JUDGMENT) or {}
    now = datetime.now(timezone.utc).isoformat()
    return EvaluationRun(
        run_index=sample + 1,
        status=judged.get("status", "error"),
        score=data.get("reward"),
        explanation=judged.get("explanation"),
        preview=judged.get("preview"),
        duration_seconds=judged.get("duration_seconds", 0.0),
        started_at=datetime.fromisoformat(judged.get("started_at", now)),
        completed_at=datetime.fromisoformat(judged.get("completed_at", now)),
        error=data.get("error"),
        raw=judged.get("raw"),
        outcome=Outcome(data["outcome"]),
        cached=judged.get("cached", False),
    )


def results_of(
    records: Sequence[RubricRecord], judged: Mapping[tuple[int, int], Mapping[str, Any]], number: int
) -> list[RecordResult]:
    """Each selected record with its judgments, from the run's records keyed (record, run), both from 0."""
    results = []
    for position, record in enumerate(records, start=1):
        label, record_id = _identity(record, position)
        runs = [_run_of(s, judged[(position - 1, s)]) for s in range(number) if (position - 1, s) in judged]
        results.append(RecordResult(record, position, label, record_id, runs))
    return results


@dataclass(frozen=True)
class Baseline:
    """Statistics from an earlier report, and where they came from."""

    source_path: Path
    statistics: dict[str, float]


@dataclass(frozen=True)
class ReportContext:
    """What the reports say about the run besides the results themselves."""

    config: RubricConfig
    config_path: Path
    data_path: Path
    number: int
    output_identifier: str | None = None
    baseline: Baseline | None = None
    pass_threshold: float = 1.0


def load_baseline(path: Path) -> Baseline:
    """Read a previous JSON report (or a bare statistics object) to compare against."""
    if not path.exists():
        raise CLIError(f"Baseline file {path} does not exist")
    if path.is_dir():
        raise CLIError(f"Baseline path {path} is a directory; expected a JSON report file")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CLIError(f"Cannot read baseline {path}: {exc}") from exc
    if not isinstance(payload, dict):
        raise CLIError(f"Baseline {path} must contain a JSON object")
    if isinstance(payload.get("overall_statistics"), dict):
        source = payload["overall_statistics"]
    elif all(key in payload for key in ("average", "variance", "stdev")):
        source = payload
    else:
        raise CLIError(
            f"Baseline {path} has no 'overall_statistics' object nor average/variance/stdev values"
        )
    values: dict[str, float] = {}
    for key, value in source.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        # Run counts stay whole numbers, so the report's baseline and delta counts read 4, not 4.0.
        values[key] = int(number) if key in _COUNT_KEYS and number.is_integer() else number
    if not values:
        raise CLIError(f"Baseline {path} contains no numeric statistics")
    return Baseline(path, values)


def baseline_delta(current: Mapping[str, Any], baseline: Baseline) -> dict[str, float]:
    """``current - baseline`` for every numeric statistic present in both."""
    delta: dict[str, float] = {}
    for key, base in baseline.statistics.items():
        value = current.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            both_counts = isinstance(value, int) and isinstance(base, int)
            delta[key] = value - base if both_counts else float(value) - base
    return delta


def outcome_counts(results: list[RecordResult]) -> OutcomeCounts:
    """How every run of every record ended."""
    return OutcomeCounts.of(run.outcome for result in results for run in result.runs)


def overall_statistics(results: list[RecordResult]) -> dict[str, Any]:
    """Statistics over every run of every record."""
    return compute_statistics([run for result in results for run in result.runs])


# -- text report ----------------------------------------------------------------------------------


def _run_line(label: str, run: EvaluationRun) -> str:
    """One judgment on one line: its score (or why it failed), duration and explanation, flattened."""
    cached = ", cached" if run.cached else ""
    head = f"[{label}] run {run.run_index:02d}: "
    if run.status == "success" and run.outcome is Outcome.COMPLETED:
        head += "n/a" if run.score is None else f"{run.score:.4f}"
        text = run.explanation or "(no explanation provided)"
    else:
        head += f"FAILED [{run.outcome.value}]"
        text = run.error or "(no error message)"
    return f"{head} ({run.duration_seconds:.2f}s{cached}) - {one_line(text, 160)}"


def _record_line(label: str, statistics: Mapping[str, Any]) -> str:
    line = f"[{label}] {statistics['success_count']} of {statistics['total_runs']} judged"
    if statistics["success_count"]:
        line += (
            f": mean {statistics['average']:.4f} (stdev {statistics['stdev']:.4f}, "
            f"min {statistics['min']:.4f}, max {statistics['max']:.4f})"
        )
    return line


def _format_value(key: str, value: float, *, signed: bool = False) -> str:
    sign = "+" if signed else ""
    if key in _COUNT_KEYS:
        return f"{round(value):{sign}d}"
    return f"{value:{sign}.6f}" if key == "variance" else f"{value:{sign}.4f}"


def render_text_report(results: list[RecordResult], context: ReportContext) -> list[str]:
    """The lines printed after an ``eval-rubric`` run."""
    info = context.config.model_info
    provider = str(info.get("provider") or "").strip() or "<unknown>"
    model = str(info.get("model") or "").strip() or "<unspecified>"
    lines = [
        f"Rubric '{context.config.rubric_id}' ({context.config.source_label}) -> provider '{provider}' model '{model}'",
        f"Loaded {len(results)} matching record(s) from {context.data_path}; "
        f"{context.number} evaluation(s) per record",
    ]
    for result in results:
        lines += [_run_line(result.label, run) for run in result.runs]
        statistics = compute_statistics(result.runs)
        if len(result.runs) > 1:
            lines.append(_record_line(result.label, statistics))
    if context.baseline is not None:
        current = overall_statistics(results)
        lines.append(f"Baseline comparison (source: {context.baseline.source_path}):")
        for key in COMPARED_KEYS:
            if key in context.baseline.statistics and key in current:
                base, now = context.baseline.statistics[key], float(current[key])
                lines.append(
                    f"  {key:<12} baseline={_format_value(key, base)} current={_format_value(key, now)} "
                    f"delta={_format_value(key, now - base, signed=True)}"
                )
    return lines


# -- JSON report ----------------------------------------------------------------------------------


def _run_json(run: EvaluationRun) -> dict[str, Any]:
    return {
        "run_index": run.run_index,
        "status": run.status,
        "started_at": run.started_at.isoformat(),
        "completed_at": run.completed_at.isoformat(),
        "duration_seconds": run.duration_seconds,
        "score": run.score,
        "explanation": run.explanation,
        "preview": run.preview,
        "error": run.error,
        "raw": run.raw,
        "outcome": run.outcome.value,
        "cached": run.cached,
    }


def build_json_report(results: list[RecordResult], context: ReportContext) -> dict[str, Any]:
    """The JSON report document; scripts read these files, so the layout is kept stable."""
    overall = overall_statistics(results)
    report: dict[str, Any] = {
        "generated_at": datetime.now(timezone.utc).isoformat(),
        "rubric_id": context.config.rubric_id,
        "rubric_source": context.config.source_label,
        "provider": context.config.model_info.get("provider"),
        "model": context.config.model_info.get("model"),
        "number": context.number,
        "pass_threshold": context.pass_threshold,
        "config_path": str(context.config_path),
        "data_path": str(context.data_path),
        "overall_statistics": overall,
        "outcomes": outcome_counts(results).to_dict(),
        "records": [
            {
                "id": result.record_id,
                "record_index": result.record_index,
                "conversation_id": result.label,
                "input_record": result.record.payload,
                "statistics": compute_statistics(result.runs),
                "runs": [_run_json(run) for run in result.runs],
            }
            for result in results
        ],
    }
    if context.output_identifier is not None:
        report["output_identifier"] = context.output_identifier
    if context.baseline is not None:
        report["baseline_comparison"] = {
            "source_path": str(context.baseline.source_path),
            "baseline_statistics": context.baseline.statistics,
            "delta_statistics": baseline_delta(overall, context.baseline),
        }
    return report


def check_report_location(path: Path) -> None:
    """Fail before any paid judge call when a report could not be written to ``path``
    (:func:`~osmosis_ai.cli.output_file.check_output`: a file can be made in its directory)."""
    try:
        check_output(path, flag="-o/--output")
    except OutputPathError as exc:
        raise CLIError(
            f"Cannot write report {path}: {exc.reason}; pass a writable location with -o/--output"
        ) from exc


def write_json_atomic(path: Path, document: Any) -> None:
    """Write ``document`` as UTF-8 JSON to ``path`` with the one output writer
    (:func:`~osmosis_ai.cli.output_file.write_output`: a regular file is replaced atomically)."""
    text = json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n"
    write_output(path, text, flag="-o/--output")
