"""``workers=0``: the reward in this process, the one way user code is called — and plain that it cannot kill."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.runtime import RewardRuntime, SampleResult, score_stream
from tests.support.processes import children

H = "tests.rewards.runtime.hostile"


def row(action: str) -> dict[str, Any]:
    return {"solution_str": action, "ground_truth": ""}


async def test_it_says_plainly_that_it_cannot_kill() -> None:
    runtime = RewardRuntime(f"{H}:hostile", workers=0, timeout=5, concurrency=1)
    assert not runtime.isolated and runtime.pids == ()
    assert runtime.describe() == (
        f"{H}:hostile: in-process (workers=0): a reward that hangs keeps running and one that crashes "
        "ends this process; timeout 5 s per sample, 1 sample at once"
    )


async def test_a_sync_reward_past_its_timeout_is_reported_but_keeps_its_thread() -> None:
    release = threading.Event()

    def hangs(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        if solution_str == "hang":
            release.wait(30)
        return 1.0

    before = children()
    async with RewardRuntime(hangs, workers=0, timeout=0.2) as runtime:
        results = [r async for r in runtime.stream([row("hang"), row("ok"), row("ok")])]
    release.set()
    by_index = {r.index: r for r in results}
    assert by_index[0].outcome is Outcome.REWARD_TIMEOUT
    assert by_index[0].error == (
        "the reward ran past its 0.2 s timeout; in-process (workers=0) it cannot be stopped and may still be running"
    )
    assert [by_index[i].score for i in (1, 2)] == [1.0, 1.0]  # later samples got threads of their own
    assert children() == before  # and no process was started


async def test_an_async_reward_past_its_timeout_is_cancelled() -> None:
    async with RewardRuntime(f"{H}:decorated_async", workers=0, timeout=0.2) as runtime:
        result = await runtime.score({"solution_str": "sleep:30", "ground_truth": ""})
    assert result.outcome is Outcome.REWARD_TIMEOUT and "it was cancelled, but in-process" in (
        result.error or ""
    )


@pytest.mark.parametrize(
    ("action", "outcome", "score", "error"),
    [
        ("score:0.5", Outcome.COMPLETED, 0.5, None),
        ("numpy", Outcome.COMPLETED, 0.5, None),
        ("sys_exit", Outcome.REWARD_ERROR, None, "SystemExit: 3"),
        ("raise", Outcome.REWARD_ERROR, None, "ValueError: bad answer"),
        ("true", Outcome.REWARD_ERROR, None, "a bool is not a score"),
        ("alloc:100000000", Outcome.REWARD_CRASH, None, "MemoryError: out of memory"),
    ],
)
async def test_outcomes_are_typed_as_with_workers(
    action: str, outcome: Outcome, score: Any, error: Any
) -> None:
    async with RewardRuntime(f"{H}:hostile", workers=0, timeout=5) as runtime:
        result = await runtime.score(row(action), index=3)
    assert (result.index, result.outcome, result.score) == (3, outcome, score)
    assert (error is None and result.error is None) or error in (result.error or "")


async def test_any_callable_will_do_in_process() -> None:
    async with RewardRuntime(lambda solution_str, ground_truth, extra_info: 2.0, workers=0) as runtime:
        assert (await runtime.score(row("x"))).score == 2.0


async def test_rows_are_taken_lazily_and_at_most_max_in_flight_ahead() -> None:
    taken = 0

    def rows() -> Any:
        nonlocal taken
        for i in range(100):
            taken += 1
            yield row(f"score:{i}")

    consumed: list[SampleResult] = []
    async for result in score_stream(f"{H}:hostile", rows(), workers=0, concurrency=2, max_in_flight=5):
        assert taken - len(consumed) <= 5
        consumed.append(result)
        await asyncio.sleep(0)
    assert sorted(r.score or 0 for r in consumed) == [float(i) for i in range(100)]


async def test_rows_may_come_from_an_async_iterable() -> None:
    async def rows() -> Any:
        for i in range(10):
            yield row(f"score:{i}")

    scores = [r.score async for r in score_stream(f"{H}:hostile", rows(), workers=0)]
    assert sorted(s or 0 for s in scores) == [float(i) for i in range(10)]
