"""run_bounded: lazy items, the concurrency limit, stopping, and the first failure cancelling the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from osmosis_ai.evaluation.pool import run_bounded


async def test_items_are_taken_lazily_and_never_more_than_the_limit_run() -> None:
    taken: list[int] = []
    running = peak = 0

    def items() -> Iterator[int]:
        for i in range(20):
            taken.append(i)
            yield i

    async def work(item: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        # While the first item runs, at most two per slot were taken (plus one waiting for room).
        if item == 0:
            assert len(taken) <= 2 * 3 + 1
        await asyncio.sleep(0.01)
        running -= 1

    assert await run_bounded(items(), work, concurrency=3) == 20
    assert peak == 3 and len(taken) == 20


async def test_the_first_failure_cancels_the_rest_and_is_raised() -> None:
    cancelled: list[int] = []

    async def work(item: int) -> None:
        if item == 2:
            raise ValueError("item 2 broke")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(item)
            raise

    with pytest.raises(ValueError, match="item 2 broke"):
        await asyncio.wait_for(run_bounded(range(100), work, concurrency=4), 10)
    # Everything started is cancelled (an item may start while the failure is being noticed).
    assert {0, 1, 3} <= set(cancelled) and 2 not in cancelled and len(cancelled) <= 4


async def test_stop_takes_no_new_items_and_lets_the_running_ones_finish() -> None:
    finished: list[int] = []

    async def work(item: int) -> None:
        await asyncio.sleep(0.01)
        finished.append(item)

    started = await run_bounded(range(100), work, concurrency=2, stop=lambda: len(finished) >= 3)
    assert started == len(finished) and 3 <= started <= 5


async def test_before_start_is_awaited_with_each_position() -> None:
    positions: list[int] = []

    async def before(position: int) -> None:
        positions.append(position)

    async def work(item: str) -> None:
        return None

    assert await run_bounded("abc", work, concurrency=1, before_start=before) == 3
    assert positions == [0, 1, 2]
