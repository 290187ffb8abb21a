"""The stored executor: the engine scores existing answers without running anything. The stored
answers' plans name and check their journals as ``reward score`` and ``regrade`` always have (the
same JSON parts hash to the same task id; the fingerprint has the same members), so a journal written
by an earlier release resumes; a Ray worker builds each kind's pipeline from the pickled plan alone."""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
import subprocess
import sys
from pathlib import Path

from osmosis_ai.judge.rubric import RubricConfig
from osmosis_ai.outcome import Outcome
from osmosis_ai.rollout.loading import source_digest
from osmosis_ai.runs.answers import Columns
from osmosis_ai.runs.engine import Pipeline, run_items
from osmosis_ai.runs.executors.stored import (
    AnswerDataset,
    EarlierRuns,
    RubricDataset,
    StoredAnswers,
    StoredExecutor,
    StoredItem,
)
from osmosis_ai.runs.items import WorkItem, work_items
from osmosis_ai.runs.journal import file_digest
from osmosis_ai.runs.judging import JUDGE, RubricJudge
from osmosis_ai.runs.plan import Rows, RunPlan, Scoring
from osmosis_ai.runs.result import Attempt, Result
from osmosis_ai.runs.scorer import Scorer, reward_function
from tests.support import rewards
from tests.support.cli import REPO, subprocess_env

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


WORKER = """
import asyncio, pickle, sys
from osmosis_ai.runs.pipeline import on_worker

plan, item = pickle.loads(sys.stdin.buffer.read())

async def main():
    async with on_worker({"plan": plan, "tags": plan.executor.tags}, 1) as pipeline:
        result = await pipeline(item)
    print(result.outcome.value, result.reward, sorted(m for m in sys.modules if m.startswith("osmosis_ai.cli")))

asyncio.run(main())
"""


def test_a_ray_worker_builds_each_stored_answers_pipeline_from_the_plan_alone(tmp_path: Path) -> None:
    """What a Ray worker does with the pickled plan, in a process of its own: no module of cli/ loaded."""
    data = tmp_path / "answers.jsonl"
    data.write_text(json.dumps({"solution_str": "it is 7", "ground_truth": "7"}) + "\n")
    scoring = Scoring((REWARD,), names=("reward",), reward="reward", workers=0)
    answers = StoredAnswers(AnswerDataset(str(data), Columns()), "reward-score", REWARD)
    score = RunPlan(Rows(str(data)), answers, scoring)
    earlier = StoredAnswers(EarlierRuns((str(data),)), "regrade", REWARD)
    regrade = RunPlan(Rows(str(data)), earlier, scoring)
    answer = Attempt(Outcome.COMPLETED, final_messages=[{"role": "assistant", "content": "it is 8"}])
    config = RubricConfig(
        "tone", "Polite?", {"provider": "openai", "model": "m"}, 0, 1, None, None, None, "r"
    )
    judged = StoredAnswers(RubricDataset(str(data), "tone"), "eval-rubric", "-r tone")
    rubric = RunPlan(Rows(str(data)), judged, Scoring(judge=RubricJudge(config, "d"), reward=JUDGE))
    refused = WorkItem(0, 0, {"solution_str": ""})  # no call to the judge: the record is refused first
    cases = [
        (score, WorkItem(0, 0, {"solution_str": "it is 7", "ground_truth": "7"})),
        (regrade, StoredItem(0, 0, {"ground_truth": "7"}, answer=answer)),
        (rubric, refused),
    ]
    env = {**subprocess_env(), "PYTHONPATH": str(REPO)}
    ran = []
    for plan, item in cases:
        out = subprocess.run([sys.executable, "-c", WORKER], input=pickle.dumps((plan, item)), env=env,
                             capture_output=True, check=True, cwd=REPO)  # fmt: skip
        ran.append(out.stdout.decode().strip())
    assert ran == ["completed 1.0 []", "completed 0.0 []", "reward_error None []"]


def _attempt(item: WorkItem) -> Attempt:
    if "answer" not in item.row:
        return Attempt(Outcome.AGENT_ERROR, error="row has no 'answer'")
    return Attempt(Outcome.COMPLETED, final_messages=[{"role": "assistant", "content": item.row["answer"]}])


def _exact(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    return float(solution_str == ground_truth)


def test_stored_answers_are_scored_and_a_row_without_one_keeps_its_reason() -> None:
    rows = [{"answer": "4", "ground_truth": "4"}, {"answer": "5", "ground_truth": "4"}, {"ground_truth": "1"}]
    scorer = Scorer([reward_function(_exact)], reward="reward")
    results: list[Result] = []
    asyncio.run(
        run_items(
            work_items(enumerate(rows)),
            Pipeline(StoredExecutor(_attempt), scorer),
            concurrency=2,
            on_result=results.append,
        )
    )
    by_row = {result.item.row_index: result for result in results}
    assert [by_row[i].reward for i in range(2)] == [1.0, 0.0]
    assert by_row[2].outcome is Outcome.AGENT_ERROR and by_row[2].error == "row has no 'answer'"
