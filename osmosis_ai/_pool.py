"""The one bounded pool: work items taken lazily, a concurrency limit, the first failure stops all.

Every batch loop of the SDK runs through :func:`run_bounded`: the run engine's items, judge
batches, ``eval-rubric``. It takes items from an iterable at most :data:`LOOKAHEAD` per slot ahead
of the ones running (a dataset streamed through it is never held whole), runs ``work(item)`` for
each with at most the limit in flight, and stops taking new items once ``stop()`` says so (the
ones in flight finish). ``then(item, result)``, when given, finishes an item after its slot is free
again (committing what ``work`` returned, say): the limit bounds the work, while the items taken and
not done, ``then`` included, stay within the same bounded distance. The first exception a work
item (or its ``then``) raises cancels the others and is raised, as is one raised by the iterable or
by ``before_start``; a work item cancelled by anything but the run itself is such a failure (its
item would otherwise end with no result).

The limit is a number or a :class:`Limit`: an object that hands out slots and may change how many
it hands out while the run goes on (the adaptive concurrency of :mod:`osmosis_ai.models`). A
number is a :class:`FixedLimit`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
R = TypeVar("R")

LOOKAHEAD = 2  # items taken per slot: one running, one waiting for it


@runtime_checkable
class Limit(Protocol):
    """Slots for work in flight. ``ceiling`` is the most it will ever hand out at once."""

    @property
    def ceiling(self) -> int: ...

    async def acquire(self) -> None: ...

    def release(self) -> None: ...


class FixedLimit:
    """A limit of ``n`` slots that never changes."""

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"concurrency must be a whole number of at least 1, got {n!r}")
        self.ceiling = n
        self._slots = asyncio.Semaphore(n)

    async def acquire(self) -> None:
        await self._slots.acquire()

    def release(self) -> None:
        self._slots.release()


def as_limit(concurrency: int | Limit) -> Limit:
    """``concurrency`` as a :class:`Limit` (a number becomes a :class:`FixedLimit`)."""
    return concurrency if isinstance(concurrency, Limit) else FixedLimit(concurrency)


async def run_bounded(
    items: Iterable[T],
    work: Callable[[T], Awaitable[R]],
    *,
    concurrency: int | Limit,
    before_start: Callable[[T], Awaitable[None]] | None = None,
    stop: Callable[[], bool] | None = None,
    then: Callable[[T, R], Awaitable[None]] | None = None,
) -> int:
    """Run ``work`` on every item, at most ``concurrency`` at once; return how many were started.

    ``before_start(item)`` is awaited once an item is taken and before it is started, e.g. to hold
    back items a consumer cannot buffer yet. Items start in the order they were taken.
    ``then(item, result)`` is awaited with ``work``'s result once the item's slot is released.
    """
    limit = as_limit(concurrency)
    # Items taken but not finished: the running ones plus as many queued for a slot, so a freed slot
    # goes straight to a waiting task (as with one task per item) while the iterable is still read
    # only a bounded distance ahead.
    taken = asyncio.Semaphore(LOOKAHEAD * limit.ceiling)
    tasks: set[asyncio.Task[None]] = set()
    failure: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
    started = 0
    ending = False  # the run is cancelling what is left

    def settled(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if task.cancelled():
            # Cancelled by something other than this run: its item would vanish without a result.
            if not ending and not failure.done():
                failure.set_result(RuntimeError("a work item was cancelled while the run went on"))
            return
        # Every failure is retrieved (else asyncio logs each as "never retrieved"); the first is raised.
        error = task.exception()
        if error is not None and not failure.done():
            failure.set_result(error)

    def stopped() -> bool:
        return failure.done() or (stop is not None and stop())

    async def guarded(item: T) -> None:
        nonlocal started
        try:
            await limit.acquire()
            try:
                if stopped():
                    return
                started += 1
                result = await work(item)
            finally:
                limit.release()
            if then is not None:
                await then(item, result)
        finally:
            taken.release()

    async def produce() -> None:
        # A task of its own, so a failure can interrupt it wherever it waits (room, before_start).
        for item in items:
            await taken.acquire()
            if before_start is not None:
                try:
                    await before_start(item)
                except BaseException:
                    taken.release()
                    raise
            if stopped():
                taken.release()
                return
            task = asyncio.create_task(guarded(item))
            tasks.add(task)
            task.add_done_callback(settled)

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
        ending = True
        producer.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.wait({producer, *tasks})
        if not failure.done():
            failure.cancel()
    return started
