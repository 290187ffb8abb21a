"""The stored answers' plans name and check their journals as ``reward score`` and ``regrade`` always
have (the same JSON parts hash to the same task id; the fingerprint has the same members), so a
journal written by an earlier release resumes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from osmosis_ai.evaluation.journal import file_digest
from osmosis_ai.rollout.loading import source_digest
from osmosis_ai.runs.answers import Columns
from osmosis_ai.runs.executors.stored import AnswerDataset, EarlierRuns, StoredAnswers
from osmosis_ai.runs.plan import Rows, RunPlan, Scoring
from tests.support import rewards

REWARD = "tests.support.rewards:contains"


def _named(parts: list[object]) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]


def test_reward_score_names_its_journal_by_the_grader_the_dataset_and_the_columns(tmp_path: Path) -> None:
    data = tmp_path / "answers.jsonl"
    data.write_text(json.dumps({"answer": "1", "truth": "1"}) + "\n")
    columns = Columns("answer", "truth", "extra")
    spec = StoredAnswers(AnswerDataset(str(data), columns), "reward-score", REWARD)
    plan = RunPlan(Rows(str(data)), spec, Scoring((REWARD,), names=("reward",), reward="reward"))
    assert plan.task_id() == _named([REWARD, str(data.resolve()), ["answer", "truth", "extra"]])
    assert spec.prepare(plan).fingerprint(1) == {
        "reward": f"{REWARD}@{source_digest(rewards.contains)}",
        "dataset": file_digest(data),
        "columns": ["answer", "truth", "extra"],
    }


def test_regrade_names_its_journal_by_the_grader_the_inputs_and_the_choices(tmp_path: Path) -> None:
    inputs = [tmp_path / "rollouts.jsonl", tmp_path / "more.jsonl"]
    for path in inputs:
        path.write_text("{}\n")
    grader = f"--eval-fn {REWARD}"
    source = EarlierRuns(tuple(map(str, inputs)), None, repeats=3, only_failed=True)
    plan = RunPlan(
        Rows(str(inputs[0])), StoredAnswers(source, "regrade", grader), Scoring((REWARD,), reward=REWARD)
    )
    assert plan.task_id() == _named([grader, [str(p.resolve()) for p in inputs], None, 3, True])
    assert plan.executor.tags == ["primary", "repeat-1", "repeat-2"]
    assert plan.executor.prepare(plan).fingerprint(1) == {
        "grader": [f"{REWARD}@{source_digest(rewards.contains)}"],
        "inputs": [file_digest(p) for p in inputs],
        "dataset": None,
        "repeats": 3,
        "only_failed": True,
    }
