"""The shared dataset reader: three formats, the column rules, errors that say where, and streaming."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from osmosis_ai.errors import (
    DatasetError,
    DatasetNotFoundError,
    DatasetParseError,
    DatasetValidationError,
)
from osmosis_ai.runs.dataset import DatasetReader, count_rows, iter_raw

GOOD = {"system_prompt": "s", "user_prompt": "What is 1 + 2?", "ground_truth": "3"}


def _jsonl(path: Path, rows: list[object], *, blank_every: int = 0) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for index, row in enumerate(rows):
            if blank_every and index % blank_every == 0:
                out.write("\n")
            out.write(json.dumps(row) + "\n")
    return path


def _rows(n: int) -> list[dict[str, str]]:
    return [{**GOOD, "user_prompt": f"question {i}", "id": str(i)} for i in range(n)]


def _parquet(path: Path, rows: list[dict[str, str]], row_group_size: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def _csv(path: Path, rows: list[dict[str, str]]) -> Path:
    header = list(rows[0])
    lines = [",".join(header)] + [",".join(row[h] for h in header) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet", "JSONL"])
def test_every_format_gives_the_same_rows_with_limit_and_offset(tmp_path: Path, kind: str) -> None:
    rows = _rows(25)
    path = tmp_path / f"d.{kind}"
    if kind.lower() == "jsonl":
        _jsonl(path, rows, blank_every=4)
    elif kind == "csv":
        _csv(path, rows)
    else:
        _parquet(path, rows, row_group_size=4)
    reader = DatasetReader(path)
    assert len(reader) == 25
    assert reader.read() == rows
    assert reader.read(limit=3, offset=9) == rows[9:12]
    assert reader.read(offset=23) == rows[23:]
    assert reader.read(offset=40) == []
    assert reader.read(limit=0) == []
    assert [i for i, _ in reader.iter_indexed(limit=2, offset=5)] == [5, 6]


def test_required_columns_match_case_insensitively_and_extras_are_kept(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "d.jsonl", [{"System_Prompt": "s", "USER_PROMPT": "u", "ground_truth": "1", "Tag": 7}]
    )
    assert DatasetReader(path).read() == [
        {"system_prompt": "s", "user_prompt": "u", "ground_truth": "1", "Tag": 7}
    ]


@pytest.mark.parametrize(
    ("row", "message", "column", "value"),
    [
        (
            {**GOOD, "ground_truth": 3},
            "column 'ground_truth' is a int (3); write it as a string",
            "ground_truth",
            3,
        ),
        ({**GOOD, "user_prompt": "  "}, "column 'user_prompt' is empty", "user_prompt", "  "),
        ({**GOOD, "system_prompt": None}, "column 'system_prompt' is null", "system_prompt", None),
    ],
)
def test_bad_values_name_row_column_and_value(
    tmp_path: Path, row: dict[str, object], message: str, column: str, value: object
) -> None:
    path = _jsonl(tmp_path / "d.jsonl", [GOOD, GOOD, GOOD, row], blank_every=2)
    reader = DatasetReader(path)
    assert reader.read(limit=3) == [GOOD] * 3  # the bad row is only met when it is read
    with pytest.raises(DatasetValidationError) as caught:
        reader.read(offset=1)
    error = caught.value
    assert str(error) == f"{path}: row 3, " + str(error).split("row 3, ", 1)[1]
    assert message in str(error)
    assert (error.row, error.column, error.value) == (3, column, value)
    assert isinstance(error, ValueError)


def test_missing_columns_and_non_objects(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "d.jsonl", [GOOD, {"user_prompt": "u"}])
    with pytest.raises(
        DatasetValidationError, match=r"row 1 is missing column\(s\) \['system_prompt', 'ground_truth'\]"
    ):
        DatasetReader(path).read()
    path = _jsonl(tmp_path / "d.jsonl", [["a"]])
    with pytest.raises(DatasetValidationError, match=r"row 0 is a list, expected an object") as caught:
        DatasetReader(path).read()
    assert caught.value.value == ["a"]


def test_parse_errors_say_where(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n{oops\n", encoding="utf-8")
    with pytest.raises(DatasetParseError, match=r"d\.jsonl: row 1: line 3 is not valid JSON") as caught:
        DatasetReader(path).read()
    assert (caught.value.row, caught.value.line) == (1, 3)
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("system_prompt,user_prompt,ground_truth\ns,u,1\ns,x,1,extra\n", encoding="utf-8")
    with pytest.raises(DatasetParseError, match=r"row 1 has more fields than the header") as caught:
        DatasetReader(csv_path).read()
    assert caught.value.value == ["extra"]
    short = tmp_path / "short.csv"
    short.write_text("system_prompt,user_prompt,ground_truth\ns,u\n", encoding="utf-8")
    with pytest.raises(DatasetValidationError, match=r"row 0, column 'ground_truth' is null"):
        DatasetReader(short).read()
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"a": "\xe9"}\n')
    with pytest.raises(DatasetParseError, match=r"row 1: line 2 is not valid JSON: 'utf-8' codec"):
        DatasetReader(latin).read()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(DatasetParseError, match=r"cannot read Parquet file"):
        DatasetReader(broken).read()


def test_a_row_nested_too_deeply_is_named(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(json.dumps(GOOD) + "\n" + f'{{"system_prompt": {deep}}}\n', encoding="utf-8")
    with pytest.raises(
        DatasetParseError, match=r"deep\.jsonl: row 1: line 2 nests arrays/objects too deeply"
    ):
        DatasetReader(path).read()


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetParseError, match=r"unsupported dataset format '\.txt'.*parquet"):
        DatasetReader(tmp_path / "d.txt")
    with pytest.raises(DatasetNotFoundError, match=r"dataset file not found") as caught:
        DatasetReader(tmp_path / "missing.csv")
    assert isinstance(caught.value, FileNotFoundError) and isinstance(caught.value, DatasetError)
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(DatasetNotFoundError, match=r"is a directory"):
        DatasetReader(tmp_path / "dir.jsonl")


def test_offset_skips_whole_parquet_row_groups(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "d.parquet", _rows(100), row_group_size=10)
    assert count_rows(path) == 100
    assert [r.index for r in iter_raw(path, offset=95)] == [95, 96, 97, 98, 99]
    assert [r.value["id"] for r in iter_raw(path, offset=37)][:2] == ["37", "38"]


def test_reading_is_a_stream(tmp_path: Path) -> None:
    """Memory follows the rows kept, not the file: a few rows of a large file cost a few rows."""
    row = {**GOOD, "user_prompt": "x" * 1000}
    path = tmp_path / "big.jsonl"
    with path.open("w", encoding="utf-8") as out:
        line = json.dumps(row) + "\n"
        for _ in range(5000):
            out.write(line)
    size = path.stat().st_size
    reader = DatasetReader(path)
    tracemalloc.start()
    try:
        assert len(reader) == 5000
        assert sum(1 for _ in reader.iter_rows()) == 5000
        assert len(reader.read(limit=2, offset=4000)) == 2
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 20, (peak, size)


def test_0_3_metadata_mode_takes_the_object_and_makes_the_prompt_and_label_optional(tmp_path: Path) -> None:
    rows = DatasetReader(_jsonl(tmp_path / "m.jsonl", [
        {"metadata": {"q": 1}},
        {"metadata": '{"q": 2}', "label": "4", "system_prompt": "s"},
        {"metadata": None, "user_prompt": "u", "ground_truth": "", "topic": "t"},
    ]), v03=True).read()  # fmt: skip
    assert rows == [
        {"metadata": {"q": 1}},
        {"system_prompt": "s", "ground_truth": "4", "metadata": {"q": 2}},
        {"topic": "t", "user_prompt": "u"},
    ]
    # Without v03 (every other command) a metadata column is one more column, the prompt required.
    with pytest.raises(DatasetValidationError, match="missing column"):
        DatasetReader(tmp_path / "m.jsonl").read()


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"metadata": {}}, "row 0 has no user_prompt and no metadata"),
        ({"metadata": "  ", "user_prompt": " "}, "row 0 has no user_prompt and no metadata"),
        ({"metadata": "{oops"}, "row 0, column 'metadata' is not valid JSON"),
        ({"metadata": "[1, 2]"}, "row 0, column 'metadata' is a list ([1, 2]); give a JSON object"),
        ({"metadata": 3, "user_prompt": "u"}, "row 0, column 'metadata' is a int (3); give a JSON object"),
    ],
)
def test_a_metadata_mode_row_without_an_input_or_object_is_named(
    tmp_path: Path, row: dict[str, object], expected: str
) -> None:
    with pytest.raises(DatasetValidationError, match=r"^.*m\.jsonl: ") as raised:
        DatasetReader(_jsonl(tmp_path / "m.jsonl", [row]), v03=True).read()
    assert expected in str(raised.value)
