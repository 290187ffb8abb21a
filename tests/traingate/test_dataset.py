"""Dataset loading and validation: rows normalised, bad rows named by file, row and column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osmosis_ai.traingate.dataset import load_dataset
from osmosis_ai.traingate.errors import DatasetError

GOOD = {"system_prompt": "s", "user_prompt": "What is 1 + 2?", "ground_truth": "3"}


def _jsonl(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_rows_are_normalised(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        [{**GOOD, "difficulty": "easy"}, {"System_Prompt": "s", "USER_PROMPT": "u", "ground_truth": "1"}],
    )
    rows = load_dataset(path)
    assert rows[0]["difficulty"] == "easy"
    assert rows[1] == {"system_prompt": "s", "user_prompt": "u", "ground_truth": "1"}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [GOOD, {**GOOD, "ground_truth": 3}],
            "row 1, column 'ground_truth' is a int (3); write it as a string",
        ),
        ([{**GOOD, "user_prompt": "  "}], "row 0, column 'user_prompt' is empty"),
        ([{**GOOD, "system_prompt": None}], "row 0, column 'system_prompt' is null"),
        ([GOOD, GOOD, {"user_prompt": "u"}], "row 2 is missing column(s) ['system_prompt', 'ground_truth']"),
        ([["a", "b"]], "row 0 is a list, expected an object"),
    ],
)
def test_bad_rows_name_file_row_and_column(tmp_path: Path, rows: list[object], message: str) -> None:
    path = _jsonl(tmp_path, rows)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_file_level_errors(tmp_path: Path) -> None:
    bad_json = tmp_path / "d.jsonl"
    bad_json.write_text(json.dumps(GOOD) + "\n\n{oops\n")
    with pytest.raises(DatasetError, match=r"line 3 is not valid JSON"):
        load_dataset(bad_json)
    with pytest.raises(DatasetError, match=r"unsupported dataset format '.txt'"):
        load_dataset(tmp_path / "d.txt")
    with pytest.raises(DatasetError, match=r"dataset file not found"):
        load_dataset(tmp_path / "missing.csv")


def test_csv_and_parquet(tmp_path: Path) -> None:
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("system_prompt,user_prompt,ground_truth\ns,What is 4 * 5?,20\ns,x,1,extra\n")
    with pytest.raises(DatasetError, match=r"row 1 has more fields than the header"):
        load_dataset(csv_path)
    csv_path.write_text("system_prompt,user_prompt,ground_truth\ns,What is 4 * 5?,20\n")
    assert load_dataset(csv_path)[0]["ground_truth"] == "20"
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet_path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([GOOD]), parquet_path)
    assert load_dataset(parquet_path) == [GOOD]
