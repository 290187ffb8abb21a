"""Reading the real output of each command, tolerating fields that come and go, and refusing others precisely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osmosis_ai.report.errors import ReportInputError
from osmosis_ai.report.readers import parse_results, read_document, read_results


def test_rollout_records_are_read_in_dataset_order_with_their_trajectories(rollouts: Path) -> None:
    records = [json.loads(line) for line in rollouts.read_text().splitlines()]
    run = read_results(rollouts)
    assert run.kind == "rollout run" and run.samples_per_row == 2
    assert [row.key for row in run.rows] == [(r, s) for r in range(4) for s in range(2)]
    by_key = {(r["row_index"], r["sample_index"]): r for r in records}
    for row in run.rows:
        record = by_key[row.key]
        assert (row.outcome, row.score, row.label) == (
            record["outcome"],
            record["reward"],
            record["rollout_id"],
        )
        assert row.trajectory.messages == record["final_messages"]
        generated = sum(len(t["token_ids"]) for t in record["turns"])
        assert sum(n for flag, n in row.trajectory.token_runs if flag) == generated
    edited = next(row for row in run.rows if row.row == 1)
    assert [(v["turn"], v["index"], v["kind"]) for v in edited.trajectory.violations] == [(1, 1, "modified")]
    second_turn = edited.trajectory.turns[4]  # the answer follows [system, user, tool call, tool result]
    assert second_turn["turn"] == 1 and second_turn["finish_reason"] == "stop"
    assert {row.outcome for row in run.rows if row.row == 2} == {"agent_error"}


def test_local_results_of_test_eval_and_eval_rubric(local_results: dict[str, Path]) -> None:
    test = read_results(local_results["test"])
    document = json.loads(local_results["test"].read_text())
    assert test.kind == "test" and [r.score for r in test.rows] == [r["reward"] for r in document["results"]]
    assert test.rows[0].prompt_tokens == document["results"][0]["token_usage"]["prompt_tokens"]

    evaluation = read_results(local_results["eval"])
    document = json.loads(local_results["eval"].read_text())
    assert evaluation.kind == "eval" and evaluation.score_name == "tests.support.evals:exact"
    config = document["config"]
    assert evaluation.pass_threshold == config["pass_threshold"] and evaluation.model == "local-model"
    assert [(r.key, r.score) for r in evaluation.rows] == [
        ((row["row_index"], run["run_index"]), run["scores"]["tests.support.evals:exact"])
        for row in document["rows"]
        for run in row["runs"]
    ]

    rubric = read_results(local_results["eval-rubric"])
    assert rubric.kind == "eval-rubric" and rubric.model == "openai/local-judge"
    assert [(r.label, r.score) for r in rubric.rows] == [
        ("c1 run 1", 0.75), ("c1 run 2", 0.75), ("c2 run 1", 0.75), ("c2 run 2", 0.75)
    ]  # fmt: skip
    assert rubric.rows[0].trajectory.messages == [{"role": "assistant", "content": "Thanks!"}]
    assert rubric.rows[0].trajectory.extra["explanation"] == "polite enough"
    assert [(f.name, f.baseline, f.candidate) for f in rubric.baseline if f.name == "average"] == [
        ("average", 0.25, 0.75)
    ]


def test_fields_added_or_left_out_by_newer_writers_are_tolerated(rollouts: Path) -> None:
    records = [json.loads(line) for line in rollouts.read_text().splitlines()]
    for record in records:
        record["a_field_from_the_future"] = {"nested": [1, 2]}
        record["drift_events"] = [{"turn": 1, "message_index": 2, "kind": "whitespace", "position": 40}]
        record["loss_mask"] = [0, 0, 1, 1, 1, 0]
        for key in ("turns", "metrics", "latency_ms", "outcome", "tools"):
            record.pop(key)
    run = read_document(records, "edited.jsonl")
    assert all(row.trajectory.token_runs == [[0, 2], [1, 3], [0, 1]] for row in run.rows)
    assert all(row.trajectory.drift[0]["kind"] == "whitespace" for row in run.rows)
    # Without "outcome", the status says it: COMPLETED rows completed, ERROR ones are the agent's.
    assert {row.outcome for row in run.rows} == {"completed", "agent_error"}
    assert all(row.latency_ms is None and row.prompt_tokens is None for row in run.rows)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "x.json: the file is empty; expected the output of 'osmosis rollout run -o'"),
        ('{"rollout_id": "a", "row_index": 0}\n{oops\n', "x.json line 2: not JSON (Expecting property name"),
        ('{"accuracy": 1}', "x.json: a JSON object with keys accuracy is not the output of"),
        ("[1, 2]", "x.json line 1: not a rollout record"),
        ('"text"', "x.json: a JSON str is not the output of"),
    ],
)
def test_files_that_are_not_results_are_refused_precisely(content: str, message: str) -> None:
    with pytest.raises(ReportInputError) as caught:
        parse_results(content, "x.json")
    assert str(caught.value).startswith(message)


def test_missing_files_and_directories_are_named(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match=r"missing\.json: no such file$"):
        read_results(tmp_path / "missing.json")
    with pytest.raises(
        ReportInputError, match=r"with no ATIF trajectory \(\*\.json\) in it; give a results file"
    ):
        read_results(tmp_path)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ReportInputError, match="not a text file"):
        read_results(tmp_path / "binary.json")
