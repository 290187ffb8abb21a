"""Dataset validation, the scripted policy's parsing, and the tokenizers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osmosis_ai.traingate.dataset import load_dataset
from osmosis_ai.traingate.errors import DatasetError, TrainGateError
from osmosis_ai.traingate.policy.scripted import ScriptedPolicy, find_expression
from osmosis_ai.traingate.tokenizer import ByteTokenizer, load_tokenizer, render_completion, render_prompt

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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What is 12 + 7?", ("add", 12, 7)),
        ("What is 45 - 18?", ("subtract", 45, 18)),
        ("Compute 2.5 * -4 please", ("multiply", 2.5, -4)),
        ("What is 9 / 3?", ("divide", 9, 3)),
        ("Add them: 3 + 1.", ("add", 3, 1)),
        ("What is 1 + 2 + 3?", None),
        ("no maths here", None),
    ],
)
def test_find_expression(text: str, expected: object) -> None:
    assert find_expression(text) == expected


async def test_scripted_policy_calls_the_tool_then_answers() -> None:
    policy = ScriptedPolicy()
    tools = [{"type": "function", "function": {"name": "multiply"}}]
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    first = await policy.generate(messages, tools=tools, params={})
    call = first.message["tool_calls"][0]
    assert first.finish_reason == "tool_calls"
    assert call["function"] == {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}
    messages += [first.message, {"role": "tool", "tool_call_id": call["id"], "content": "42"}]
    final = await policy.generate(messages, tools=tools, params={})
    assert final.message == {"role": "assistant", "content": "The answer is #### 42"}
    missing = await policy.generate(messages[:1], tools=[], params={})
    assert "multiply" in missing.message["content"] and "tool_calls" not in missing.message


def test_byte_tokenizer_prompt_extends_previous_prompt_plus_completion() -> None:
    tok = ByteTokenizer()
    first = [{"role": "user", "content": "héllo"}]
    answer = {"role": "assistant", "content": "hi"}
    prompt0 = tok.encode(render_prompt(first))
    completion = tok.encode(render_completion(answer))
    prompt1 = tok.encode(render_prompt([*first, answer, {"role": "user", "content": "again"}]))
    assert prompt1[: len(prompt0) + len(completion)] == prompt0 + completion
    assert bytes(completion).decode() == "hi\n"


def test_hf_tokenizer_from_tokenizer_json(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hi": 1, "<|assistant|>": 2}
    hf = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = load_tokenizer(str(path))
    assert tok.encode("hi hi") == [1, 1]
    with pytest.raises(TrainGateError, match="tokenizer file not found"):
        load_tokenizer(str(tmp_path / "nope.json"))


def test_importing_traingate_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, osmosis_ai.traingate, osmosis_ai.cli.commands.rollout; "
        "print(sorted({'aiohttp', 'litellm', 'pydantic', 'rich', 'uvicorn'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
