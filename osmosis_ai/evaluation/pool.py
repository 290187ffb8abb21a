"""Running work items with a concurrency limit: the loop every batch command shares.

:func:`run_bounded` takes items from an iterable only when a slot is free (a dataset streamed
through it is never held whole), runs ``work(item)`` for each with at most ``concurrency`` in
flight, and stops taking new items once ``stop()`` says so — the ones in flight finish. The first
exception a work item raises cancels the others and is raised, as is one raised by the iterable or
by ``before_start``. ``osmosis rollout run`` drives rollouts over the wire with it
(:func:`osmosis_ai.traingate.runner.stream_rollouts`); each item ends in its own outcome, which
the work function records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_bounded(
    items: Iterable[T],
    work: Callable[[T], Awaitable[None]],
    *,
    concurrency: int,
    before_start: Callable[[int], Awaitable[None]] | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Run ``work`` on every item, at most ``concurrency`` at once; return how many were started.

    ``before_start(n)`` is awaited before the ``n``-th item (0-based) takes its slot, e.g. to hold
    back items a consumer cannot buffer yet.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    slots = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()
    failure: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
    started = 0

    def settled(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not failure.done() and not task.cancelled() and (error := task.exception()) is not None:
            failure.set_result(error)

    async def guarded(item: T) -> None:
        try:
            await work(item)
        finally:
            slots.release()

    async def produce() -> None:
        # A task of its own, so a failure can interrupt it wherever it waits (a slot, before_start).
        nonlocal started
        for item in items:
            if before_start is not None:
                await before_start(started)
            await slots.acquire()
            if stop is not None and stop():
                slots.release()
                return
            task = asyncio.create_task(guarded(item))
            tasks.add(task)
            task.add_done_callback(settled)
            started += 1

    producer = asyncio.create_task(produce())
    try:
        first: set[asyncio.Future[Any]] = {producer, failure}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if not failure.done():
            producer.result()  # what the iterable or before_start raised, if anything
            while tasks and not failure.done():
                running: set[asyncio.Future[Any]] = {*tasks, failure}
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        if failure.done():
            raise failure.result()
    finally:
        producer.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.wait({producer, *tasks})
        if not failure.done():
            failure.cancel()
    return started
