"""run_bounded: lazy items, the concurrency limit, stopping, and the first failure cancelling the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from osmosis_ai._pool import run_bounded


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


async def test_an_item_cancelled_by_something_else_is_a_failure_not_a_missing_result() -> None:
    finished: list[int] = []

    async def work(item: int) -> None:
        if item == 1:
            # As aiohttp cancels a request still queued for a connection when its pool closes.
            waiter = asyncio.get_running_loop().create_future()
            waiter.cancel()
            await waiter
        finished.append(item)

    with pytest.raises(RuntimeError, match="cancelled while the run went on"):
        await run_bounded(range(3), work, concurrency=1)
    assert 1 not in finished


async def test_stop_takes_no_new_items_and_lets_the_running_ones_finish() -> None:
    finished: list[int] = []

    async def work(item: int) -> None:
        await asyncio.sleep(0.01)
        finished.append(item)

    started = await run_bounded(range(100), work, concurrency=2, stop=lambda: len(finished) >= 3)
    assert started == len(finished) and 3 <= started <= 5


async def test_before_start_is_awaited_with_each_item_before_it_starts() -> None:
    admitted: list[str] = []
    started: list[str] = []

    async def before(item: str) -> None:
        assert item not in started
        admitted.append(item)

    async def work(item: str) -> None:
        assert item in admitted
        started.append(item)

    assert await run_bounded("abc", work, concurrency=1, before_start=before) == 3
    assert admitted == started == ["a", "b", "c"]


class Valve:
    """A limit whose number of slots the test changes while the run goes on."""

    def __init__(self, slots: int, ceiling: int) -> None:
        self.ceiling = ceiling
        self.slots = slots
        self.held = 0
        self._changed = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.held < self.slots)
            self.held += 1

    def release(self) -> None:
        self.held -= 1
        asyncio.get_running_loop().create_task(self._notify())

    async def resize(self, slots: int) -> None:
        self.slots = slots
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


async def test_a_limit_that_changes_mid_run_is_followed() -> None:
    valve = Valve(slots=1, ceiling=4)
    running = 0
    peaks: dict[int, int] = {}
    go = asyncio.Event()
    finished = 0

    async def work(item: int) -> None:
        nonlocal running, finished
        running += 1
        peaks[valve.slots] = max(peaks.get(valve.slots, 0), running)
        assert running <= valve.slots or valve.slots < 4
        if item == 0:
            await go.wait()
        else:
            await asyncio.sleep(0.001)
        running -= 1
        finished += 1

    async def widen() -> None:
        # Only item 0 can run while the valve has one slot (the loop turns enough times for the
        # others to start if they could); widening lets them through.
        for _ in range(50):
            await asyncio.sleep(0)
        assert running == 1 and finished == 0
        await valve.resize(4)
        while finished < 10:
            await asyncio.sleep(0.001)
        go.set()

    started, _ = await asyncio.gather(run_bounded(range(30), work, concurrency=valve), widen())
    assert started == 30
    assert peaks[1] == 1 and 1 < peaks[4] <= 4


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
async def test_a_concurrency_that_is_not_a_whole_number_of_at_least_one_is_refused(bad: object) -> None:
    async def work(item: int) -> None:
        return None

    with pytest.raises(ValueError, match="concurrency must be a whole number of at least 1"):
        await run_bounded(range(3), work, concurrency=bad)  # type: ignore[arg-type]
