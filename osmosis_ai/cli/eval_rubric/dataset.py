"""Rubric datasets: JSON lines (one object per line), CSV or Parquet (one record per row), read one at a time.

Every line needs a non-blank ``solution_str`` (even lines for other rubrics). Optional fields:
``rubric_id`` (selects records, case-insensitively), ``conversation_id`` (display label), ``id``,
``ground_truth``, ``original_input``, ``metadata`` (object, quoted to the judge), ``extra_info``
(object, context for custom rubric functions) and per-record ``score_min``/``score_max``.
Lines are read one at a time by the shared reader (:func:`osmosis_ai.runs.dataset.iter_raw`).
Errors name the file and the 1-based line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.errors import DatasetParseError
from osmosis_ai.runs.dataset import iter_raw


@dataclass(frozen=True)
class RubricRecord:
    """One dataset line, validated; ``payload`` is the object as written."""

    line_number: int
    payload: dict[str, Any]
    solution_str: str
    rubric_id: str
    conversation_id: str | None
    ground_truth: str | None
    original_input: str | None
    metadata: dict[str, Any] | None
    extra_info: dict[str, Any] | None
    score_min: float | None
    score_max: float | None


def _objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of ``path``, read by the shared reader."""
    try:
        # .csv and .parquet by the shared reader's formats; any other name is read as JSON lines
        kind = path.suffix.lower().lstrip(".") if path.suffix.lower() in (".csv", ".parquet") else "jsonl"
        for raw in iter_raw(path, format=kind):
            line = raw.line or raw.index + 1
            if not isinstance(raw.value, dict):
                raise CLIError(f"{path}:{line}: expected a JSON object, got {type(raw.value).__name__}")
            yield line, raw.value
    except DatasetParseError as exc:
        cause = exc.__cause__
        if exc.line is None or cause is None:
            raise CLIError(f"Cannot read dataset {path}: {cause or exc}") from exc
        if isinstance(cause, RecursionError):
            raise CLIError(
                f"{path}:{exc.line}: the JSON is nested too deeply to read; flatten the record"
            ) from exc
        if isinstance(cause, json.JSONDecodeError):
            raise CLIError(f"{path}:{exc.line}: invalid JSON: {cause.msg} (column {cause.colno})") from exc
        raise CLIError(f"{path}:{exc.line}: invalid JSON: {cause}") from exc


def load_json_objects(path: Path) -> list[dict[str, Any]]:
    """Every object in ``path`` without further checks (for ``preview``)."""
    objects = [value for _, value in _objects(path)]
    if not objects:
        raise CLIError(f"No JSON records found in {path}")
    return objects


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bound(value: Any, key: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CLIError(f"{where}: '{key}' must be a number, got {value!r}")
    if not math.isfinite(value):
        raise CLIError(f"{where}: '{key}' must be a finite number, got {value!r}")
    return float(value)


def _record(number: int, payload: dict[str, Any], path: Path) -> RubricRecord:
    where = f"{path}:{number}"
    solution = payload.get("solution_str")
    if not isinstance(solution, str) or not solution.strip():
        raise CLIError(f"{where}: 'solution_str' must be a non-empty string")
    metadata = payload.get("metadata")
    extra_info = payload.get("extra_info")
    rubric_id = payload.get("rubric_id")
    return RubricRecord(
        line_number=number,
        payload=payload,
        solution_str=solution,
        rubric_id=rubric_id if isinstance(rubric_id, str) else "",
        conversation_id=_text(payload.get("conversation_id")),
        ground_truth=_text(payload.get("ground_truth")),
        original_input=_text(payload.get("original_input")),
        metadata=metadata if isinstance(metadata, dict) else None,
        extra_info=extra_info if isinstance(extra_info, dict) else None,
        score_min=_bound(payload.get("score_min"), "score_min", where),
        score_max=_bound(payload.get("score_max"), "score_max", where),
    )


def load_records(path: Path, rubric_id: str) -> list[RubricRecord]:
    """The records of ``path`` for ``rubric_id`` (ignoring case); every line is validated.

    Lines for other rubrics are checked and dropped as they are read, so memory follows the
    selected records, not the file.
    """
    wanted = rubric_id.casefold()
    total = 0
    selected = []
    for number, payload in _objects(path):
        record = _record(number, payload, path)
        total += 1
        if record.rubric_id.casefold() == wanted:
            selected.append(record)
    if not total:
        raise CLIError(f"No JSON records found in {path}")
    if not selected:
        raise CLIError(f"No records in {path} have rubric_id '{rubric_id}' (matched case-insensitively)")
    return selected
