"""Many rows with one call: :func:`score_batch` (results in row order), its async twin
:func:`ascore_batch`, and :func:`score_stream` (results as they finish, rows taken lazily).

Each starts a :class:`~osmosis_ai.rewards.runtime.scoring.RewardRuntime` for the call and closes it
before returning, on every path. The reward is loaded and the settings checked before any worker
process starts; :func:`score_batch` and :func:`ascore_batch` also check every row first, so a bad
row is reported before any work is done (and none is thrown away).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any

from osmosis_ai._sync import synchronous
from osmosis_ai.rewards.runtime.sample import SampleResult, prepare
from osmosis_ai.rewards.runtime.scoring import DEFAULT_TIMEOUT, RewardRuntime, Row


async def ascore_batch(
    reward: str | Callable[..., Any],
    rows: Iterable[Row],
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    workers: int | None = None,
    memory_limit_mb: int | None = None,
    concurrency: int | None = None,
) -> list[SampleResult]:
    """Score every row with ``reward``; one :class:`SampleResult` per row, in row order.

    The arguments are :class:`~osmosis_ai.rewards.runtime.scoring.RewardRuntime`'s.
    """
    runtime = RewardRuntime(
        reward, timeout=timeout, workers=workers, memory_limit_mb=memory_limit_mb, concurrency=concurrency
    )
    arguments = [prepare(row, index, runtime.target.mode) for index, row in enumerate(rows)]
    results: list[Any] = [None] * len(arguments)
    async with runtime:
        async for result in runtime._stream(arguments, None, prepared=True):
            assert result.index is not None
            results[result.index] = result
    return results


score_batch = synchronous(
    ascore_batch,
    "score_batch",
    """Score every row with ``reward``; one :class:`SampleResult` per row, in row order.

    :func:`ascore_batch`, blocking: from plain code, async code or Jupyter alike (a running event
    loop is blocked meanwhile; ``await ascore_batch(...)`` does not block it).
    """,
)


async def score_stream(
    reward: str | Callable[..., Any],
    rows: Iterable[Row] | AsyncIterable[Row],
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    workers: int | None = None,
    memory_limit_mb: int | None = None,
    concurrency: int | None = None,
    max_in_flight: int | None = None,
) -> AsyncIterator[SampleResult]:
    """Yield each row's :class:`SampleResult` as it finishes (``result.index`` is the row's position).

    Rows are taken lazily, at most ``max_in_flight`` ahead of the results consumed, so memory stays
    bounded however many there are. Close the iterator when stopping early (``async with
    contextlib.aclosing(score_stream(...))``) to end the worker processes at once; they are ended
    in any case when it is garbage collected.
    """
    runtime = RewardRuntime(
        reward, timeout=timeout, workers=workers, memory_limit_mb=memory_limit_mb, concurrency=concurrency
    )
    async with runtime:
        async for result in runtime.stream(rows, max_in_flight=max_in_flight):
            yield result
