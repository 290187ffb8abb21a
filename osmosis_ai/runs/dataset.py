"""The dataset reader: JSONL, CSV and Parquet rows, read as a stream.

A dataset has one row per prompt with the columns ``system_prompt``, ``user_prompt`` and
``ground_truth`` (matched case-insensitively; each a non-blank string — numbers are refused rather
than silently turned into text). Other columns are kept with their own key and value and travel
with the row. In a normalised row the three required keys are lower-case. Read as 0.3.8 reads a
local dataset (``v03=True``, ``osmosis eval run``), ``system_prompt`` may be left out and ``label``
stands for ``ground_truth``; and a dataset with a ``metadata`` column is in 0.3's metadata mode: that
column is a JSON object (or its JSON text), the rollout's input, and ``user_prompt`` and
``ground_truth`` become optional (left out, null or blank: absent), but a row needs a prompt or a
non-empty object.

Rows are read one at a time — JSONL line by line, CSV record by record, Parquet batch by batch from
the row groups that hold the wanted rows — so memory follows the rows a caller keeps, not the size
of the file. pyarrow is imported only for Parquet.

Every row comes out as JSON values, since it travels in a request's JSON metadata. Parquet types JSON
has no word for are converted as they are read: timestamps, dates and times to ISO 8601 strings,
decimals to their exact decimal string, durations to seconds (a float); binary columns are refused
(no text encoding of bytes is the obvious one; convert the column, e.g. to base64 strings, or drop
it). A JSON escape of a lone surrogate (``"\ud800"``), which no UTF-8 text can carry, is refused
with its row and column. A CSV file may start with a byte order mark, and its fields have no size
limit beyond the row's own (Python's ``csv`` module stops at 128 KiB unless told otherwise, a
process-wide setting this module raises).

Every error is a :class:`~osmosis_ai.errors.DatasetError` naming the file, the 0-based
row (blank JSONL lines and the CSV header do not count; with an offset the row is still counted
from the start of the file), the 1-based line for JSONL, the column and the offending value.

:func:`iter_raw` gives the raw rows of any supported file for callers with their own row schema
(``eval-rubric``'s records); :class:`DatasetReader` adds the column rules above.

There is one of it: ``tests/test_one_of_each.py::test_one_dataset_reader``.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_ai.errors import DatasetNotFoundError, DatasetParseError, DatasetValidationError

REQUIRED_COLUMNS = ("system_prompt", "user_prompt", "ground_truth")
METADATA_COLUMN = "metadata"  # 0.3's metadata mode (``v03``): the column holding the rollout's input
SUFFIXES = (".jsonl", ".csv", ".parquet")
PARQUET_BATCH_ROWS = 1024
CSV_FIELD_LIMIT = 2**31 - 1  # the largest csv.field_size_limit every platform's C long takes
SHOWN_VALUE_CHARS = 80  # of an offending value quoted in an error line
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # in a raw JSON line: maybe a lone one

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
        if file.is_dir():
            raise DatasetNotFoundError(f"{file}: is a directory, not a dataset file", path=file)
        if file.exists():
            raise DatasetParseError(
                f"{file}: is not a regular file (a FIFO, a device or a socket); a dataset is read more "
                "than once (counted, checked, then run), so save it to a file first",
                path=file,
            )
        raise DatasetNotFoundError(f"{file}: dataset file not found", path=file)
    return file, kind


def _shown(value: Any) -> str:
    """``repr(value)``, shortened for an error line."""
    text = repr(value)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


def _where(file: Path, index: int, column: Any, line: int | None) -> str:
    place = f"{file}: row {index}" + (f", column {str(column)!r}" if column is not None else "")
    return place + (f" (line {line})" if line is not None else "")


def _lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in the strings of ``value`` (keys included), as its JSON escape."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return f"\\u{ord(found.group()):04x}" if found else None
    if isinstance(value, dict):
        items: Any = (part for pair in value.items() for part in pair)
    elif isinstance(value, list):
        items = value
    else:
        return None
    for item in items:
        if (escape := _lone_surrogate(item)) is not None:
            return escape
    return None


def _check_surrogates(file: Path, index: int, line: int, value: Any) -> None:
    columns = value.items() if isinstance(value, dict) else [(None, value)]
    for column, cell in columns:
        escape = _lone_surrogate(column) or _lone_surrogate(cell)
        if escape is not None:
            raise DatasetValidationError(
                f"{_where(file, index, column, line)}: holds the escape {escape}, a lone surrogate that no "
                "UTF-8 text can carry; fix or remove that escape",
                path=file,
                row=index,
                line=line,
                column=None if column is None else str(column),
            )


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
                if _ESCAPED_SURROGATE.search(line):  # only then can a decoded string hold one
                    _check_surrogates(file, index, number, value)
                yield RawRow(index, number, value)
            index += 1


def _csv_reader(handle: Any) -> csv.DictReader[str]:
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
    return csv.DictReader(handle)


def _csv(file: Path, offset: int) -> Iterator[RawRow]:
    # utf-8-sig: a byte order mark at the start (spreadsheets write one) is not part of the first column's name.
    with file.open(encoding="utf-8-sig", newline="") as handle:
        reader = _csv_reader(handle)
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
    converted = [field.name for field in parquet.schema_arrow if _converts(field.type)]
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=groups):
            for value in batch.to_pylist():
                if index >= offset:
                    for column in converted:
                        value[column] = _json_value(value[column], file, index, column)
                    yield RawRow(index, None, value)
                index += 1
    except DatasetValidationError:
        raise
    except (OSError, ValueError) as exc:
        raise DatasetParseError(f"{file}: cannot read Parquet file: {exc}", path=file, row=index) from exc


def _converts(kind: Any) -> bool:
    """Whether values of the Arrow type ``kind`` come out of pyarrow as something JSON has no word for."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _converts(kind.value_type)
    if pa.types.is_nested(kind):
        return any(_converts(kind.field(i).type) for i in range(kind.num_fields))
    return not (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_null(kind)
    )


def _json_value(value: Any, file: Path, index: int, column: str) -> Any:
    """A Parquet value as JSON values (see the module docstring); binary is refused."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {key: _json_value(item, file, index, column) for key, item in value.items()}
    if isinstance(value, list | tuple):  # a map column comes as (key, value) pairs
        return [_json_value(item, file, index, column) for item in value]
    if isinstance(value, bytes | bytearray | memoryview):
        raise DatasetValidationError(
            f"{_where(file, index, column, None)}: binary data ({len(value)} bytes) cannot travel in a request's "
            "JSON metadata; convert that column to strings (e.g. base64) or drop it",
            path=file,
            row=index,
            column=column,
        )
    return value


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
        with file.open(encoding="utf-8-sig", newline="") as handle:
            return sum(1 for _ in _csv_reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetParseError(f"{file}: cannot read dataset: {exc}", path=file) from exc


# -- the column rules ----------------------------------------------------------------------------------


def normalize_row(raw: Any, index: int, path: str | Path, *, v03: bool = False) -> Row:
    """Check one raw row against the column rules (0.3.8's with ``v03``); return it with the required
    keys in lower case."""
    file = Path(path)
    if not isinstance(raw, dict):
        raise DatasetValidationError(
            f"{file}: row {index} is a {type(raw).__name__}, expected an object with {list(REQUIRED_COLUMNS)}",
            path=file,
            row=index,
            value=raw,
        )
    by_lower = {str(key).lower(): key for key in raw}
    required: tuple[str, ...] = REQUIRED_COLUMNS
    metadata: dict[str, Any] | None = None
    if v03:
        if "ground_truth" not in by_lower and "label" in by_lower:
            raw = {("ground_truth" if key == by_lower["label"] else key): value for key, value in raw.items()}
            by_lower["ground_truth"] = "ground_truth"
        optional = {"system_prompt"}
        if METADATA_COLUMN in by_lower:
            metadata = _metadata_object(raw[by_lower[METADATA_COLUMN]], file, index)
            optional |= {"user_prompt", "ground_truth"}
            # A CSV gives every row every column: an empty cell there is a column left out.
            blank = {c for c in optional if c in by_lower and _blank(raw[by_lower[c]])}
            raw = {k: v for k, v in raw.items() if k != by_lower[METADATA_COLUMN] and k not in
                   {by_lower[c] for c in blank}}  # fmt: skip
            by_lower = {str(key).lower(): key for key in raw}
            if metadata is None and "user_prompt" not in by_lower:
                raise DatasetValidationError(
                    f"{file}: row {index} has no user_prompt and no metadata; give a user_prompt or a "
                    f"non-empty JSON object in its {METADATA_COLUMN!r} column",
                    path=file,
                    row=index,
                    column=METADATA_COLUMN,
                )
        required = tuple(c for c in REQUIRED_COLUMNS if c not in optional or c in by_lower)
    missing = [column for column in required if column not in by_lower]
    if missing:
        raise DatasetValidationError(
            f"{file}: row {index} is missing column(s) {missing} (has {sorted(map(str, raw))})",
            path=file,
            row=index,
            column=missing[0],
        )
    row: Row = {key: value for key, value in raw.items() if str(key).lower() not in REQUIRED_COLUMNS}
    for column in required:
        value = raw[by_lower[column]]
        where = {"path": file, "row": index, "column": column, "value": value}
        if value is None:
            raise DatasetValidationError(
                f"{file}: row {index}, column {column!r} is null; give a non-empty string", **where
            )
        if not isinstance(value, str):
            example = f', e.g. "{value}"' if len(str(value)) <= SHOWN_VALUE_CHARS else ""
            raise DatasetValidationError(
                f"{file}: row {index}, column {column!r} is a {type(value).__name__} ({_shown(value)}); "
                f"write it as a string{example}",
                **where,
            )
        if not value.strip():
            raise DatasetValidationError(
                f"{file}: row {index}, column {column!r} is empty; give a non-empty string", **where
            )
        row[column] = value
    if metadata is not None:
        row[METADATA_COLUMN] = metadata
    return row


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _metadata_object(value: Any, file: Path, index: int) -> dict[str, Any] | None:
    """A metadata-mode row's ``metadata``: a JSON object, or the JSON text of one (a CSV cell); an
    empty one, a blank cell or null is none."""
    where = {"path": file, "row": index, "column": METADATA_COLUMN, "value": value}
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DatasetValidationError(
                f"{file}: row {index}, column {METADATA_COLUMN!r} is not valid JSON ({exc.msg}); give a "
                'JSON object, e.g. {"question": "..."}',
                **where,
            ) from None
    elif _blank(value):
        return None
    if not isinstance(value, dict):
        raise DatasetValidationError(
            f"{file}: row {index}, column {METADATA_COLUMN!r} is a {type(value).__name__} ({_shown(value)}); "
            "give a JSON object",
            **where,
        )
    return value or None


class DatasetReader:
    """A dataset file in the prompt format, read as a stream.

    Construction checks the suffix and that the file exists; rows are read only when iterated.
    ``len(reader)`` counts the rows once (a pass over the file without keeping them) and caches it.
    """

    def __init__(self, file_path: str | Path, *, v03: bool = False) -> None:
        self.file_path, self.format = _check_file(file_path)
        self.v03 = v03
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
            yield normalize_row(raw.value, raw.index, self.file_path, v03=self.v03)
            if limit is not None and taken >= limit:
                return

    def iter_indexed(self, limit: int | None = None, offset: int = 0) -> Iterator[tuple[int, Row]]:
        """Like :meth:`iter_rows`, each row with its absolute 0-based index."""
        for position, row in enumerate(self.iter_rows(limit, offset)):
            yield offset + position, row

    def read(self, limit: int | None = None, offset: int = 0) -> list[Row]:
        """:meth:`iter_rows` as a list (for small datasets and tests)."""
        return list(self.iter_rows(limit, offset))
