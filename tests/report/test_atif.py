"""ATIF trajectories of finished records: every document valid against the packaged schema, and read
back by the report as the record it was written from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from osmosis_ai.report import atif
from osmosis_ai.report.errors import ReportInputError
from osmosis_ai.report.readers import parse_results, read_results

VALIDATOR = jsonschema.Draft202012Validator(atif.schema())


def check_atif(document: Mapping[str, Any]) -> None:
    """The schema, and the two rules it cannot say: step ids 1, 2, 3... and observations that
    name only their own step's tool calls."""
    VALIDATOR.validate(document)
    steps = document["steps"]
    assert [step["step_id"] for step in steps] == list(range(1, len(steps) + 1))
    for step in steps:
        calls = {call["tool_call_id"] for call in step.get("tool_calls") or ()}
        for result in (step.get("observation") or {}).get("results", ()):
            assert result.get("source_call_id") in (None, *calls)


def valid_file(path: Path) -> dict[str, Any]:
    """A written trajectory file: strict JSON (no NaN), valid ATIF."""
    document = json.loads(path.read_text(encoding="utf-8"), parse_constant=pytest.fail)
    check_atif(document)
    return document


TOOL_CALL = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
RECORD = {
    "rollout_id": "tg-ab12-r3-s1",
    "row_index": 3,
    "sample_index": 1,
    "status": "COMPLETED",
    "outcome": "completed",
    "reward": 1.0,
    "finish_reason": "stop",
    "latency_ms": 12.5,
    "model": "scripted",
    "tools": ["add"],
    "final_messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "1+2?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call_0", "content": "3"},
        {"role": "assistant", "content": "#### 3", "reasoning_content": "easy"},
    ],
    "turns": [
        {"index": 0, "num_request_messages": 2, "finish_reason": "tool_calls", "token_ids": [5, 6],
         "logprobs": [-0.5, -0.25], "prompt_token_ids": [1, 2, 3], "usage": {"prompt_tokens": 3, "completion_tokens": 2},
         "sampling": {"temperature": 1.0}, "token_source": "tokenizer:bytes", "latency_ms": 1.0},
        {"index": 1, "num_request_messages": 4, "finish_reason": "stop", "token_ids": [7],
         "logprobs": [-1.0], "prompt_token_ids": [1, 2, 3, 5, 6, 9], "usage": {"prompt_tokens": 6, "completion_tokens": 1},
         "sampling": {}, "token_source": "tokenizer:bytes", "latency_ms": 2.0},
    ],
    "append_only_violations": [],
    "input_record": {"system_prompt": "be brief", "user_prompt": "1+2?", "ground_truth": "3"},
}  # fmt: skip


def test_a_rollout_record_maps_messages_tool_calls_token_ids_and_reward() -> None:
    document = atif.trajectory_of(RECORD, command="rollout run")
    check_atif(document)
    assert document["schema_version"] == "ATIF-v1.7" == atif.ATIF_VERSION
    assert document["trajectory_id"] == "tg-ab12-r3-s1" and document["agent"]["model_name"] == "scripted"
    system, user, call, answer = document["steps"]
    assert (system["source"], user["source"], call["source"], answer["source"]) == (
        "system",
        "user",
        "agent",
        "agent",
    )
    assert call["tool_calls"] == [
        {"tool_call_id": "call_0", "function_name": "add", "arguments": {"a": 1, "b": 2}}
    ]
    assert call["observation"] == {"results": [{"content": "3", "source_call_id": "call_0"}]}
    assert call["metrics"]["prompt_token_ids"] == [1, 2, 3] and call["metrics"]["completion_token_ids"] == [
        5,
        6,
    ]
    assert call["metrics"]["logprobs"] == [-0.5, -0.25] and call["llm_call_count"] == 1
    assert answer["reasoning_content"] == "easy" and answer["metrics"]["extra"]["finish_reason"] == "stop"
    assert document["final_metrics"] == {
        "total_prompt_tokens": 9,
        "total_completion_tokens": 3,
        "total_steps": 4,
    }
    osmosis = document["extra"]["osmosis"]
    assert (osmosis["reward"], osmosis["outcome"], osmosis["command"]) == (1.0, "completed", "rollout run")
    assert osmosis["input_record"]["ground_truth"] == "3" and "append_only_violations" not in osmosis


def test_the_report_reads_a_trajectory_as_the_record_it_was_written_from(tmp_path: Path) -> None:
    records = parse_results(json.dumps(RECORD), "records.jsonl")
    path = tmp_path / atif.file_name(RECORD)
    path.write_text(atif.dumps(atif.trajectory_of(RECORD, command="rollout run")), encoding="utf-8")
    assert valid_file(path)["steps"][2]["metrics"]["completion_token_ids"] == [5, 6]  # one line, still JSON
    for run in (read_results(path), read_results(tmp_path)):
        assert (run.kind, run.model) == ("rollout run", "scripted")
        [row] = run.rows
        [expected] = records.rows
        assert (row.key, row.outcome, row.score, row.latency_ms) == ((3, 1), "completed", 1.0, 12.5)
        assert (row.prompt_tokens, row.completion_tokens) == (9, 3)
        assert row.trajectory.to_dict() == expected.trajectory.to_dict()


ODD_MESSAGES = [
    {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "tool", "tool_call_id": "nobody", "content": "orphan"},
    {"role": "critic", "content": {"verdict": "fine"}, "tool_calls": [TOOL_CALL], "reasoning_content": "hm"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "not json"}}, "garbage"]},
    {"role": "tool", "tool_call_id": "elsewhere", "content": None},
    {"role": "tool", "content": "no id"},
    {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:"}}]},
]  # fmt: skip


@pytest.mark.parametrize(
    "record",
    [
        {"row_index": 0, "final_messages": ODD_MESSAGES, "reward": float("nan"), "scores": {"a": float("inf")}},
        {"row_index": 2, "sample_index": 1, "model_tag": "baseline", "outcome": "infra_error", "error": "boom",
         "final_messages": [], "input_record": {"system_prompt": "s", "user_prompt": "u"}},
        {"row_index": 1, "outcome": "agent_error", "final_messages": []},
        {**RECORD, "turns": [{**RECORD["turns"][0], "logprobs": [float("-inf"), 0.0], "num_request_messages": 7}]},
    ],
    ids=["odd-messages", "no-messages-but-prompts", "nothing-at-all", "unmatched-turn"],
)  # fmt: skip
def test_odd_records_still_give_valid_documents(record: dict[str, Any], tmp_path: Path) -> None:
    document = atif.trajectory_of(record, command="test")
    path = tmp_path / atif.file_name(record)
    path.write_text(atif.dumps(document), encoding="utf-8")
    valid_file(path)
    assert read_results(path).rows or record.get("model_tag") == "baseline"


def test_odd_messages_keep_what_atif_has_no_field_for() -> None:
    steps = atif.trajectory_of({"final_messages": ODD_MESSAGES}, command="test")["steps"]
    developer, orphan, critic, assistant, image = steps
    assert developer == {"step_id": 1, "source": "system", "message": "a\nb",
                         "extra": {"original_role": "developer", "content": ODD_MESSAGES[0]["content"]}}  # fmt: skip
    assert orphan["source"] == "system" and orphan["observation"]["results"][0]["extra"] == {
        "tool_call_id": "nobody"
    }
    assert critic["source"] == "user" and critic["extra"]["original_role"] == "critic"
    assert critic["extra"]["tool_calls"][0]["function_name"] == "add" and "tool_calls" not in critic
    assert assistant["tool_calls"] == [{"tool_call_id": "x", "function_name": "f", "arguments": {},
                                        "extra": {"arguments": "not json"}}]  # fmt: skip
    assert [r.get("source_call_id") for r in assistant["observation"]["results"]] == [None, None]
    assert image["message"].startswith('[{"type": "image_url"')


def test_ids_become_safe_file_names() -> None:
    assert atif.file_name({"rollout_id": "../../etc/passwd"}) == "_.._etc_passwd.json"
    assert atif.file_name({"row_index": 4, "sample_index": 2}) == "row4-sample2.json"
    assert (
        atif.file_name({"row_index": 4, "sample_index": 2, "model_tag": "baseline"})
        == "baseline-row4-sample2.json"
    )


def test_a_directory_without_trajectories_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ReportInputError, match="no ATIF trajectory"):
        read_results(tmp_path)
