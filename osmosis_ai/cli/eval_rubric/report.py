"""``eval-rubric`` reports: the text report for the terminal, the JSON report file, baselines.

The JSON report is written atomically (a temporary file in the same directory, then
``os.replace``), so an interrupted run never leaves a half-written report behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval_rubric.config import RubricConfig
from osmosis_ai.cli.eval_rubric.engine import EvaluationRun, RecordResult, compute_statistics
from osmosis_ai.evaluation.outcome import Outcome, OutcomeCounts

COMPARED_KEYS = ("average", "variance", "stdev", "min", "max", "success_count", "failure_count", "total_runs")
_COUNT_KEYS = frozenset({"success_count", "failure_count", "total_runs"})


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


def _detail(name: str, value: str) -> list[str]:
    first, *rest = value.splitlines() or [""]
    return [f"    {name}: {first}", *(f"      {line}" for line in rest)]


def _run_lines(run: EvaluationRun) -> list[str]:
    cached = " (cached: the stored verdict of an identical earlier judgment)" if run.cached else ""
    lines = [f"  Run {run.run_index:02d} [{run.status.upper()}]{cached}"]
    if run.outcome is not Outcome.COMPLETED:
        lines += _detail("outcome", run.outcome.value)
    if run.status == "success":
        lines += _detail("score", "n/a" if run.score is None else f"{run.score:.4f}")
        if run.preview:
            lines += _detail("preview", run.preview)
        lines += _detail("explanation", run.explanation or "(no explanation provided)")
    else:
        lines += _detail("error", run.error or "(no error message)")
        if run.preview:
            lines += _detail("preview", run.preview)
        if run.explanation:
            lines += _detail("explanation", run.explanation)
    return [*lines, f"    duration: {run.duration_seconds:.2f}s"]


def _summary_lines(statistics: Mapping[str, Any]) -> list[str]:
    lines = [
        "  Summary:",
        f"    total: {statistics['total_runs']}",
        f"    successes: {statistics['success_count']}",
        f"    failures: {statistics['failure_count']}",
    ]
    if statistics["success_count"]:
        return [
            *lines,
            f"    average: {statistics['average']:.4f}",
            f"    variance: {statistics['variance']:.6f}",
            f"    stdev: {statistics['stdev']:.4f}",
            f"    min/max: {statistics['min']:.4f}/{statistics['max']:.4f}",
        ]
    return [*lines, "    average: n/a", "    variance: n/a", "    stdev: n/a", "    min/max: n/a"]


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
        f"Loaded {len(results)} matching record(s) from {context.data_path}",
        f"Running {context.number} evaluation(s) per record",
        "",
    ]
    for result in results:
        lines.append(f"[{result.label}]")
        for index, run in enumerate(result.runs):
            if index:
                lines.append("")
            lines += _run_lines(run)
        statistics = compute_statistics(result.runs)
        if len(result.runs) > 1 or statistics["failure_count"]:
            lines += ["", *_summary_lines(statistics)]
        lines.append("")
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
    """Fail before any paid judge call when a report could not be written to ``path``.

    The report's directory must exist or be creatable, and be writable. This is proved by making
    (and at once removing) a probe file in it, or a probe directory in its nearest existing
    ancestor, because permission bits alone do not tell (root, read-only mounts, ``/proc``).
    Nothing is left behind.
    """
    directory = path.parent
    fix = "pass a writable location with -o/--output"
    try:
        existing = directory
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise CLIError(f"Cannot write report {path}: {existing} is not a directory; {fix}")
        if existing == directory:
            descriptor, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=directory)
            os.close(descriptor)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".osmosis-probe-", dir=existing))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CLIError(f"Cannot write report {path}: {existing} is not writable ({reason}); {fix}") from exc


def _current_umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def write_json_atomic(path: Path, document: Any) -> None:
    """Write ``document`` as UTF-8 JSON to ``path`` via a temporary file and ``os.replace``.

    The file gets the permissions of a normally created file (``0o666`` less the umask), not the
    private ``0o600`` of the temporary file. ``OSError`` propagates; nothing partial is left.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_current_umask())
            json.dump(document, handle, ensure_ascii=False, indent=2, default=str)
            handle.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
