"""The one dataset reader: JSONL, CSV and Parquet rows, read as a stream.

A dataset has one row per prompt with the columns ``system_prompt``, ``user_prompt`` and
``ground_truth`` (matched case-insensitively; each a non-blank string — numbers are refused rather
than silently turned into text). Other columns are kept with their own key and value and travel
with the row. In a normalised row the three required keys are lower-case.

Rows are read one at a time — JSONL line by line, CSV record by record, Parquet batch by batch from
the row groups that hold the wanted rows — so memory follows the rows a caller keeps, not the size
of the file. pyarrow is imported only for Parquet.

Every error is a :class:`~osmosis_ai.evaluation.errors.DatasetError` naming the file, the 0-based
row (blank JSONL lines and the CSV header do not count; with an offset the row is still counted
from the start of the file), the 1-based line for JSONL, the column and the offending value.

:func:`iter_raw` gives the raw rows of any supported file for callers with their own row schema
(``eval-rubric``'s records); :class:`DatasetReader` adds the column rules above.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_ai.evaluation.errors import (
    DatasetNotFoundError,
    DatasetParseError,
    DatasetValidationError,
)

REQUIRED_COLUMNS = ("system_prompt", "user_prompt", "ground_truth")
SUFFIXES = (".jsonl", ".csv", ".parquet")
PARQUET_BATCH_ROWS = 1024

Row = dict[str, Any]


@dataclass(frozen=True)
class RawRow:
    """One row as stored: its 0-based ``index``, its 1-based ``line`` (JSONL only) and its ``value``."""

    index: int
    line: int | None
    value: Any


def dataset_format(path: str | Path) -> str:
    """The format of ``path`` from its suffix (``"jsonl"``, ``"csv"``, ``"parquet"``), case-insensitively."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise DatasetParseError(
            f"{file}: unsupported dataset format {suffix or '(none)'!r}; use .jsonl, .csv or .parquet "
            "(Parquet is the most compact for large datasets)",
            path=file,
        )
    return suffix[1:]


def _check_file(path: str | Path, kind: str | None = None) -> tuple[Path, str]:
    file = Path(path)
    if kind is None:
        kind = dataset_format(file)
    elif kind not in _READERS:
        raise ValueError(f"unknown dataset format {kind!r}; expected one of {sorted(_READERS)}")
    if not file.is_file():
        what = "is a directory, not a dataset file" if file.is_dir() else "dataset file not found"
        raise DatasetNotFoundError(f"{file}: {what}", path=file)
    return file, kind


# -- raw rows, per format ------------------------------------------------------------------------------


def _jsonl(file: Path, offset: int) -> Iterator[RawRow]:
    index = 0
    # Bytes, decoded line by line, so an encoding error is pinned to its row like any bad line.
    with file.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if index >= offset:  # rows before the offset are counted, not parsed
                try:
                    value = json.loads(line)
                except ValueError as exc:  # UnicodeDecodeError included
                    raise DatasetParseError(
                        f"{file}: row {index}: line {number} is not valid JSON: {exc}",
                        path=file,
                        row=index,
                        line=number,
                    ) from exc
                except RecursionError as exc:
                    raise DatasetParseError(
                        f"{file}: row {index}: line {number} nests arrays/objects too deeply to decode; "
                        "flatten that row",
                        path=file,
                        row=index,
                        line=number,
                    ) from exc
                yield RawRow(index, number, value)
            index += 1


def _csv(file: Path, offset: int) -> Iterator[RawRow]:
    with file.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        for index, record in enumerate(reader):
            if index < offset:
                continue
            if None in record:
                raise DatasetParseError(
                    f"{file}: row {index} has more fields than the header ({reader.fieldnames})",
                    path=file,
                    row=index,
                    value=record[None],
                )
            yield RawRow(index, None, dict(record))


def _parquet_file(file: Path) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DatasetParseError(
            f"{file}: reading Parquet needs pyarrow; install it with: pip install 'osmosis-ai[server]' "
            "(or convert the file to JSONL)",
            path=file,
        ) from exc
    try:
        return pq.ParquetFile(file)
    except Exception as exc:  # pyarrow raises its own error types for a bad file
        raise DatasetParseError(f"{file}: cannot read Parquet file: {exc}", path=file) from exc


def _parquet(file: Path, offset: int) -> Iterator[RawRow]:
    parquet = _parquet_file(file)
    metadata = parquet.metadata
    groups: list[int] = []
    index = 0  # index of the first row of the first group kept
    start = 0
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        if start + rows <= offset:  # the whole group lies before the offset: never read it
            start += rows
            continue
        if not groups:
            index = start
        groups.append(group)
        start += rows
    if not groups:
        return
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=groups):
            for value in batch.to_pylist():
                if index >= offset:
                    yield RawRow(index, None, value)
                index += 1
    except (OSError, ValueError) as exc:
        raise DatasetParseError(f"{file}: cannot read Parquet file: {exc}", path=file, row=index) from exc


_READERS = {"jsonl": _jsonl, "csv": _csv, "parquet": _parquet}


def iter_raw(path: str | Path, *, offset: int = 0, format: str | None = None) -> Iterator[RawRow]:
    """The rows of ``path`` as stored, from row ``offset`` on, one at a time.

    ``format`` (``"jsonl"``, ``"csv"``, ``"parquet"``) reads a file whatever its name says; by
    default the suffix decides. Raises :class:`DatasetParseError` for an unknown suffix, an unreadable file or a malformed row
    (bad JSON, a CSV record longer than its header) and :class:`DatasetNotFoundError` when the file
    does not exist. The file is opened when iteration starts and closed when it ends.
    """
    if offset < 0:
        raise ValueError(f"offset must be at least 0, got {offset}")
    file, kind = _check_file(path, format)
    return _guarded(file, _READERS[kind](file, offset))


def _guarded(file: Path, rows: Iterator[RawRow]) -> Iterator[RawRow]:
    last = -1
    try:
        for row in rows:
            last = row.index
            yield row
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        where = f" after row {last}" if last >= 0 else ""
        raise DatasetParseError(f"{file}: cannot read dataset{where}: {exc}", path=file) from exc


def count_rows(path: str | Path) -> int:
    """The number of rows in ``path`` without keeping any: non-blank JSONL lines, CSV records, Parquet metadata."""
    file, kind = _check_file(path)
    try:
        if kind == "parquet":
            return int(_parquet_file(file).metadata.num_rows)
        if kind == "jsonl":
            with file.open("rb") as lines:
                return sum(1 for line in lines if line.strip())
        with file.open(encoding="utf-8", newline="") as handle:
            return sum(1 for _ in csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetParseError(f"{file}: cannot read dataset: {exc}", path=file) from exc


# -- the column rules ----------------------------------------------------------------------------------


def normalize_row(raw: Any, index: int, path: str | Path) -> Row:
    """Check one raw row against the column rules; return it with the required keys in lower case."""
    file = Path(path)
    if not isinstance(raw, dict):
        raise DatasetValidationError(
            f"{file}: row {index} is a {type(raw).__name__}, expected an object with {list(REQUIRED_COLUMNS)}",
            path=file,
            row=index,
            value=raw,
        )
    by_lower = {str(key).lower(): key for key in raw}
    missing = [column for column in REQUIRED_COLUMNS if column not in by_lower]
    if missing:
        raise DatasetValidationError(
            f"{file}: row {index} is missing column(s) {missing} (has {sorted(map(str, raw))})",
            path=file,
            row=index,
            column=missing[0],
        )
    row: Row = {key: value for key, value in raw.items() if str(key).lower() not in REQUIRED_COLUMNS}
    for column in REQUIRED_COLUMNS:
        value = raw[by_lower[column]]
        where = {"path": file, "row": index, "column": column, "value": value}
        if value is None:
            raise DatasetValidationError(
                f"{file}: row {index}, column {column!r} is null; give a non-empty string", **where
            )
        if not isinstance(value, str):
            raise DatasetValidationError(
                f"{file}: row {index}, column {column!r} is a {type(value).__name__} ({value!r}); "
                f'write it as a string, e.g. "{value}"',
                **where,
            )
        if not value.strip():
            raise DatasetValidationError(
                f"{file}: row {index}, column {column!r} is empty; give a non-empty string", **where
            )
        row[column] = value
    return row


class DatasetReader:
    """A dataset file in the prompt format, read as a stream.

    Construction checks the suffix and that the file exists; rows are read only when iterated.
    ``len(reader)`` counts the rows once (a pass over the file without keeping them) and caches it.
    """

    def __init__(self, file_path: str | Path) -> None:
        self.file_path, self.format = _check_file(file_path)
        self._length: int | None = None

    def __len__(self) -> int:
        if self._length is None:
            self._length = count_rows(self.file_path)
        return self._length

    def iter_rows(self, limit: int | None = None, offset: int = 0) -> Iterator[Row]:
        """Normalised rows from row ``offset`` on, at most ``limit`` of them, validated as they are read."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be at least 0, got {limit}")
        if limit == 0:
            return
        for taken, raw in enumerate(iter_raw(self.file_path, offset=offset), start=1):
            yield normalize_row(raw.value, raw.index, self.file_path)
            if limit is not None and taken >= limit:
                return

    def iter_indexed(self, limit: int | None = None, offset: int = 0) -> Iterator[tuple[int, Row]]:
        """Like :meth:`iter_rows`, each row with its absolute 0-based index."""
        for position, row in enumerate(self.iter_rows(limit, offset)):
            yield offset + position, row

    def read(self, limit: int | None = None, offset: int = 0) -> list[Row]:
        """:meth:`iter_rows` as a list (for small datasets and tests)."""
        return list(self.iter_rows(limit, offset))
