"""The run engine: items in key order, journalled before they count, a systemic failure stops the run,
the item's time limit covers scoring, and the one scorer applies the one score rule."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from osmosis_ai._deadline import Deadline
from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.engine import Pipeline, run_items
from osmosis_ai.runs.items import WorkItem, work_items
from osmosis_ai.runs.journal import BASELINE, PRIMARY, Journal
from osmosis_ai.runs.result import Attempt, Result
from osmosis_ai.runs.scorer import ScoreFn, Scorer, reward_function

ROW = {"system_prompt": "s", "user_prompt": "u", "ground_truth": "4"}
ANSWER = [{"role": "user", "content": "2+2"}, {"role": "assistant", "content": "4"}]


class Scripted:
    """An executor whose attempts the test decides, per row: (outcome, agent reward, systemic)."""

    def __init__(self, plan: dict[int, Any] | None = None, *, hold: asyncio.Event | None = None) -> None:
        self.plan = plan or {}
        self.hold = hold
        self.ran: list[tuple[int, int, str]] = []

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        self.ran.append((item.row_index, item.sample_index, item.model_tag))
        if self.hold is not None and item.row_index > 0:
            await self.hold.wait()
        step = self.plan.get(item.row_index, (Outcome.COMPLETED, 1.0))
        if step == "systemic":
            return Attempt(Outcome.INFRA_ERROR, error="bad key", systemic="bad key")
        outcome, reward = step
        return Attempt(outcome, final_messages=list(ANSWER), agent_reward=reward, duration_ms=1.0)


def _rows(count: int) -> list[tuple[int, dict[str, str]]]:
    return [(i, dict(ROW)) for i in range(count)]


def test_work_items_come_in_key_order_without_the_skipped_ones() -> None:
    items = work_items(_rows(2), n=2, tags=(PRIMARY, BASELINE), skip=lambda item: item.key == (0, 1))
    assert [(i.row_index, i.sample_index, i.model_tag) for i in items] == [
        (0, 0, PRIMARY), (0, 0, BASELINE), (1, 0, PRIMARY), (1, 0, BASELINE), (1, 1, PRIMARY), (1, 1, BASELINE),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="n must be at least 1"):
        list(work_items(_rows(1), n=0))


async def test_every_result_is_journalled_before_the_application_sees_it(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite", {"run": 1})
    seen: list[Result] = []

    def on_result(result: Result) -> None:
        assert result.item.key in journal.records()  # already committed when it counts
        seen.append(result)

    with contextlib.closing(journal):
        report = await run_items(
            work_items(_rows(5), n=2), Pipeline(Scripted(), Scorer()), concurrency=3, journal=journal,
            keep_messages=False, on_result=on_result,
        )  # fmt: skip
        records = journal.records()
    assert report.started == 10 and report.stopped_by is None and len(seen) == 10
    assert sorted(records) == [(r, s) for r in range(5) for s in range(2)]
    assert records[(2, 1)].data["reward"] == 1.0 and records[(2, 1)].data["sample_index"] == 1


async def test_a_systemic_failure_stops_the_run_and_is_not_journalled(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite", {"run": 1})
    executor = Scripted({3: "systemic"})
    seen: list[Result] = []
    with contextlib.closing(journal):
        report = await run_items(
            work_items(_rows(50)), Pipeline(executor, Scorer()), concurrency=2, journal=journal,
            on_result=seen.append,
        )  # fmt: skip
        records = journal.records()
    assert report.stop_reason == "bad key" and report.stopped_by is not None
    assert report.stopped_by.item.row_index == 3 and (3, 0) not in records
    # Nothing starts after the failure is seen; the ones already in flight finish and count.
    assert len(executor.ran) <= 6 and set(records) == {(r, 0) for r, _, _ in executor.ran if r != 3}
    assert any(r.attempt.systemic for r in seen)


async def test_a_slot_is_free_while_its_result_is_committed_and_a_slow_consumer_is_bounded() -> None:
    from osmosis_ai._pool import LOOKAHEAD

    release = asyncio.Event()
    executor = Scripted()

    async def consume() -> None:
        await release.wait()

    def on_result(result: Result) -> Any:
        return consume()

    run = asyncio.create_task(
        run_items(work_items(_rows(50)), Pipeline(executor, Scorer()), concurrency=2, on_result=on_result)
    )
    # Every item's consumer waits, yet more items than slots run: a slot stands for the work only,
    # and the items between taken and done stay within the pool's window.
    await asyncio.wait_for(_until(lambda: len(executor.ran) == LOOKAHEAD * 2), 10)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(executor.ran) == LOOKAHEAD * 2 and not run.done()
    release.set()
    report = await asyncio.wait_for(run, 10)
    assert report.started == 50 and len(executor.ran) == 50


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0)


async def test_a_failing_consumer_cancels_the_items_in_flight() -> None:
    hold = asyncio.Event()
    executor = Scripted(hold=hold)

    def on_result(result: Result) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await asyncio.wait_for(
            run_items(
                work_items(_rows(10)), Pipeline(executor, Scorer()), concurrency=4, on_result=on_result
            ),
            10,
        )
    assert not hold.is_set() and len(executor.ran) <= 5  # one may start while the failure is noticed


async def test_the_item_time_limit_covers_scoring() -> None:
    async def slow(item: WorkItem, attempt: Attempt, threads: Any) -> float:
        await asyncio.sleep(30)
        return 1.0

    result = await Pipeline(Scripted(), Scorer([ScoreFn("slow", slow)]), timeout=0.05)(WorkItem(0, 0, ROW))
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "'slow' did not return within the item's time limit of 0.05s"


def _returning(value: Any) -> Any:
    def reward(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> Any:
        return value

    return reward


@pytest.mark.parametrize(
    ("value", "expected"), [(np.float32(0.5), 0.5), (1, 1.0), (True, None), (float("nan"), None)]
)
async def test_the_reward_follows_the_score_rule_whoever_reports_it(
    value: Any, expected: float | None
) -> None:
    item = WorkItem(0, 0, ROW)
    trainer_side = Scorer([reward_function(_returning(value))], reward="reward")
    for scorer, executor in (
        (trainer_side, Scripted()),
        (Scorer(), Scripted({0: (Outcome.COMPLETED, value)})),
    ):
        result = await Pipeline(executor, scorer)(item)
        if expected is None:
            assert result.outcome is Outcome.REWARD_ERROR and result.reward is None
            assert "must " in (result.reward_error or "") and "finite real number" in (
                result.reward_error or ""
            )
        else:
            assert result.outcome is Outcome.COMPLETED and result.reward == expected
            assert type(result.reward) is float


async def test_every_score_function_runs_and_every_error_is_kept() -> None:
    def broken(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        raise ZeroDivisionError("boom")

    def exits(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        sys.exit(3)

    scorer = Scorer(
        [
            reward_function(_returning(0.25), "quarter"),
            reward_function(broken, "broken"),
            reward_function(exits, "exits"),
            reward_function(
                lambda solution_str, ground_truth, extra_info: solution_str == ground_truth, "bool"
            ),
        ]
    )
    result = await Pipeline(Scripted(), scorer)(WorkItem(0, 0, ROW))
    assert result.outcome is Outcome.REWARD_ERROR and result.scores == {"quarter": 0.25}
    assert result.score_errors["broken"] == "ZeroDivisionError: boom"
    assert result.score_errors["exits"] == "SystemExit: 3"
    assert "a bool is not a score" in result.score_errors["bool"]
    record = result.record()
    assert record["outcome"] == "reward_error" and record["eval_errors"] == result.score_errors


async def test_failed_attempts_are_never_scored() -> None:
    calls = 0

    async def counted(item: WorkItem, attempt: Attempt, threads: Any) -> float:
        nonlocal calls
        calls += 1
        return 0.0

    scorer = Scorer([ScoreFn("f", counted)])
    for outcome in (Outcome.AGENT_ERROR, Outcome.MODEL_ERROR, Outcome.INFRA_ERROR, Outcome.NO_MODEL_CALLS):
        result = await Pipeline(Scripted({0: (outcome, 1.0)}), scorer)(WorkItem(0, 0, ROW))
        assert result.outcome is outcome and result.scores == {} and result.reward is None
    assert calls == 0


def test_scorer_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="names none of the score functions"):
        Scorer([], reward="missing")
    with pytest.raises(ValueError, match="must differ"):
        Scorer([reward_function(_returning(1.0)), reward_function(_returning(1.0))])
