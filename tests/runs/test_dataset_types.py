"""Datasets the reader used to let through: Parquet types JSON has no word for, lone-surrogate escapes,
CSV with a byte order mark or fields over 128 KiB, a FIFO, a huge non-string ground truth."""

from __future__ import annotations

import datetime
import decimal
import json
import os
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.errors import DatasetError, DatasetValidationError
from osmosis_ai.runs.dataset import DatasetReader, iter_raw
from osmosis_ai.runs.executors.requests import dataset_row_to_request

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

PROMPTS = {"system_prompt": "s", "user_prompt": "What is 1 + 1?", "ground_truth": "2"}
WHEN = datetime.datetime(2024, 1, 2, 3, 4, 5, 600000)


def _parquet(tmp_path: Path, name: str, column: Any) -> Path:
    path = tmp_path / f"{name}.parquet"
    rows = len(column)
    table = pa.table({**{k: [v] * rows for k, v in PROMPTS.items()}, name: column})
    pq.write_table(table, path)
    return path


CONVERTED = [
    ("timestamp", pa.array([WHEN], pa.timestamp("us")), "2024-01-02T03:04:05.600000"),
    ("timestamp_tz", pa.array([WHEN.replace(tzinfo=datetime.timezone.utc)], pa.timestamp("ms", tz="UTC")),
     "2024-01-02T03:04:05.600000+00:00"),
    ("date", pa.array([WHEN.date()], pa.date32()), "2024-01-02"),
    ("time", pa.array([WHEN.time()], pa.time64("us")), "03:04:05.600000"),
    ("decimal", pa.array([decimal.Decimal("1.10")], pa.decimal128(5, 2)), "1.10"),
    ("duration", pa.array([datetime.timedelta(seconds=90, microseconds=500000)], pa.duration("us")), 90.5),
    ("nested", pa.array([{"when": WHEN.date(), "amounts": [decimal.Decimal("0.5")]}]),
     {"when": "2024-01-02", "amounts": ["0.5"]}),
    ("mapped", pa.array([[("at", WHEN.date())]], pa.map_(pa.string(), pa.date32())), [["at", "2024-01-02"]]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "column", "expected"), CONVERTED, ids=[c[0] for c in CONVERTED])
def test_parquet_types_json_lacks_are_converted_as_read(
    tmp_path: Path, name: str, column: Any, expected: Any
) -> None:
    row = DatasetReader(_parquet(tmp_path, name, column)).read()[0]
    assert row[name] == expected
    request = dataset_row_to_request(row, 0)  # the request JSON takes it
    assert json.loads(request.model_dump_json())["metadata"][name] == expected


def test_a_binary_column_is_refused_with_its_row_and_column(tmp_path: Path) -> None:
    path = _parquet(tmp_path, "image", pa.array([None, b"\x89PNG"], pa.binary()))
    reader = DatasetReader(path)
    assert reader.read(limit=1)[0]["image"] is None  # a null is fine
    with pytest.raises(DatasetValidationError) as caught:
        reader.read()
    assert str(caught.value) == (
        f"{path}: row 1, column 'image': binary data (4 bytes) cannot travel in a request's JSON "
        "metadata; convert that column to strings (e.g. base64) or drop it"
    )
    assert (caught.value.row, caught.value.column) == (1, "image")


@pytest.mark.parametrize(
    ("cell", "column"),
    [
        ({"user_prompt": "What is \\ud800?"}, "user_prompt"),
        ({"tags": ["fine", {"deep": "\\uDFFF"}]}, "tags"),
        ({"\\ud83d": 1}, "\\ud83d"),
    ],
)
def test_a_lone_surrogate_escape_is_refused_with_its_row_and_column(
    tmp_path: Path, cell: dict[str, Any], column: str
) -> None:
    path = tmp_path / "data.jsonl"
    good = json.dumps({**PROMPTS, "emoji": "\ud83d\ude00 is a pair"})  # a valid pair passes
    bad = json.dumps(PROMPTS)[:-1] + ", " + ", ".join(f'"{k}": {_raw(v)}' for k, v in cell.items()) + "}"
    path.write_text(good + "\n\n" + bad + "\n")
    with pytest.raises(DatasetValidationError) as caught:
        list(iter_raw(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: row 1, column ")
    assert "(line 3): holds the escape \\u" in message and "a lone surrogate" in message
    assert caught.value.row == 1 and caught.value.line == 3
    assert caught.value.column == json.loads(f'"{column}"')


def _raw(value: Any) -> str:
    """JSON text with backslash escapes written as they are."""
    return json.dumps(value).replace("\\\\", "\\")


def test_a_csv_with_a_byte_order_mark_reads_like_one_without(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(b"\xef\xbb\xbfsystem_prompt,user_prompt,ground_truth\ns,What is 1 + 1?,2\n")
    reader = DatasetReader(path)
    assert len(reader) == 1 and reader.read() == [PROMPTS]


def test_csv_fields_over_128_kib_are_read(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    blob = "x" * (1 << 20)
    path.write_text(f"system_prompt,user_prompt,ground_truth,context\ns,What is 1 + 1?,2,{blob}\n")
    reader = DatasetReader(path)
    assert len(reader) == 1 and reader.read()[0]["context"] == blob


def test_a_fifo_is_named_for_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    os.mkfifo(path)
    with pytest.raises(DatasetError) as caught:
        DatasetReader(path)
    assert "not found" not in str(caught.value)
    assert str(caught.value).startswith(f"{path}: is not a regular file (a FIFO, a device or a socket)")


def test_a_huge_non_string_ground_truth_is_not_echoed_whole(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({**PROMPTS, "ground_truth": list(range(100_000))}) + "\n")
    with pytest.raises(DatasetValidationError) as caught:
        DatasetReader(path).read()
    message = str(caught.value)
    assert len(message) < 300
    assert message.startswith(f"{path}: row 0, column 'ground_truth' is a list ([0, 1, 2, ")
    assert message.endswith("...); write it as a string")
