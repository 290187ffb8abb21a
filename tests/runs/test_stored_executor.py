"""The stored executor: the engine scores existing answers without running anything."""

from __future__ import annotations

import asyncio

from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.engine import Pipeline, run_items
from osmosis_ai.runs.executors.stored import StoredExecutor
from osmosis_ai.runs.items import WorkItem, work_items
from osmosis_ai.runs.result import Attempt, Result
from osmosis_ai.runs.scorer import Scorer, reward_function


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
