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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.errors import DatasetParseError
from osmosis_ai.judge.rubric import RecordRefused, RubricRecord, record_of
from osmosis_ai.runs.dataset import iter_raw

__all__ = ["RubricRecord", "load_json_objects", "load_records"]


def rubric_format(path: Path) -> str:
    """The dataset reader's format of a rubric dataset: .csv and .parquet by their names; any other
    name is read as JSON lines."""
    return path.suffix.lower().lstrip(".") if path.suffix.lower() in (".csv", ".parquet") else "jsonl"


def _objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of ``path``, read by the shared reader."""
    try:
        for raw in iter_raw(path, format=rubric_format(path)):
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


def _record(number: int, payload: dict[str, Any], path: Path) -> RubricRecord:
    try:
        return record_of(number, payload)
    except RecordRefused as exc:
        raise CLIError(f"{path}:{number}: {exc}") from None


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
