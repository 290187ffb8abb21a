"""Datasets in the test-mode format: one row per prompt with ``system_prompt``, ``user_prompt``, ``ground_truth``.

JSONL, CSV and Parquet (through pyarrow, imported only for Parquet) are read whole. Required
columns are matched case-insensitively and must be non-blank strings; other columns are kept and
travel to the agent in the request metadata. Every problem is reported with the file, the row
(0-based, as in ``row_index``; JSONL parse errors also give the 1-based line) and the column.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from osmosis_ai.traingate.errors import DatasetError

REQUIRED_COLUMNS = ("system_prompt", "user_prompt", "ground_truth")
SUFFIXES = (".jsonl", ".csv", ".parquet")

Row = dict[str, Any]


def _read_jsonl(path: Path) -> list[Any]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise DatasetError(f"{path}: line {line_number} is not valid JSON: {exc}") from exc
    return rows


def _read_csv(path: Path) -> list[Any]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = []
        for index, row in enumerate(reader):
            if None in row:
                raise DatasetError(
                    f"{path}: row {index} has more fields than the header ({reader.fieldnames})"
                )
            rows.append(dict(row))
        return rows


def _read_parquet(path: Path) -> list[Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DatasetError(
            f"{path}: reading Parquet needs pyarrow; install it with: pip install 'osmosis-ai[server]' "
            "(or convert the file to JSONL)"
        ) from exc
    try:
        return list(pq.read_table(path).to_pylist())
    except Exception as exc:
        raise DatasetError(f"{path}: cannot read Parquet file: {exc}") from exc


def normalize_row(raw: Any, index: int, path: Path) -> Row:
    """Check one raw row and return it with the required keys in lower case."""
    if not isinstance(raw, dict):
        raise DatasetError(
            f"{path}: row {index} is a {type(raw).__name__}, expected an object with {list(REQUIRED_COLUMNS)}"
        )
    by_lower = {str(key).lower(): key for key in raw}
    missing = [column for column in REQUIRED_COLUMNS if column not in by_lower]
    if missing:
        raise DatasetError(
            f"{path}: row {index} is missing column(s) {missing} (has {sorted(map(str, raw))})"
        )
    row: Row = {key: value for key, value in raw.items() if str(key).lower() not in REQUIRED_COLUMNS}
    for column in REQUIRED_COLUMNS:
        value = raw[by_lower[column]]
        if value is None:
            raise DatasetError(f"{path}: row {index}, column {column!r} is null; give a non-empty string")
        if not isinstance(value, str):
            raise DatasetError(
                f"{path}: row {index}, column {column!r} is a {type(value).__name__} ({value!r}); "
                f'write it as a string, e.g. "{value}"'
            )
        if not value.strip():
            raise DatasetError(f"{path}: row {index}, column {column!r} is empty; give a non-empty string")
        row[column] = value
    return row


def load_dataset(path: str | Path) -> list[Row]:
    """Read and validate a whole dataset file; raise :class:`DatasetError` on the first problem."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise DatasetError(
            f"{file}: unsupported dataset format {suffix or '(none)'!r}; use .jsonl, .csv or .parquet"
        )
    if not file.is_file():
        raise DatasetError(f"{file}: dataset file not found")
    try:
        raw_rows = {".jsonl": _read_jsonl, ".csv": _read_csv, ".parquet": _read_parquet}[suffix](file)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{file}: cannot read dataset: {exc}") from exc
    if not raw_rows:
        raise DatasetError(f"{file}: the dataset has no rows")
    return [normalize_row(raw, index, file) for index, raw in enumerate(raw_rows)]
