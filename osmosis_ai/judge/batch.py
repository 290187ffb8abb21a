"""Judging many outputs at once: bounded concurrency, results in input order, one shared rate limit.

``items`` are dictionaries of :func:`~osmosis_ai.judge.evaluate.aevaluate_rubric` keyword
arguments. They run on the SDK's one bounded pool (:func:`osmosis_ai._pool.run_bounded`): the
next item starts as soon as one finishes (a sliding window, not waves), so one slow judgment
never holds up the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from osmosis_ai._pool import Limit, run_bounded
from osmosis_ai._sync import synchronous
from osmosis_ai.judge.errors import JudgeInputError, JudgeSettingError
from osmosis_ai.judge.evaluate import CacheOption, aevaluate_rubric
from osmosis_ai.judge.keys import configured_api_base
from osmosis_ai.judge.ratelimit import RateLimiter
from osmosis_ai.judge.retry import RetryPolicy
from osmosis_ai.judge.types import RewardRubricRunResult
from osmosis_ai.models.concurrency import AdaptiveLimit, concurrency_limit, observer_of

BatchResult = float | RewardRubricRunResult | BaseException


def _checked(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise JudgeInputError(
            f"items must be a list of dicts of evaluate_rubric arguments, got {type(items).__name__}"
        )
    checked = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise JudgeInputError(f"items[{index}] must be a dict of evaluate_rubric arguments, got {item!r}")
        checked.append(dict(item))
    return checked


async def aevaluate_rubric_batch(
    items: Sequence[Mapping[str, Any]],
    *,
    concurrency: int | str = 8,
    return_exceptions: bool = False,
    on_progress: Callable[[int, int], object] | None = None,
    cache: CacheOption = None,
    retry: RetryPolicy | None = None,
    requests_per_minute: float | None = None,
    rate_limiter: RateLimiter | None = None,
) -> list[BatchResult]:
    """Judge every item with at most ``concurrency`` calls in flight; results follow input order.

    Args:
        items: keyword arguments for ``aevaluate_rubric``, one dict per judgment.
        concurrency: judgments in flight at once, or ``"auto"``: as many as the judge's server takes,
            learnt from its latency, its 429s and (for an ``api_base`` serving vLLM/SGLang metrics)
            its ``/metrics`` (:mod:`osmosis_ai.models.concurrency`; at most 256).
        return_exceptions: put a failed item's exception in its slot instead of raising it; by
            default the first failure cancels the rest and is raised.
        on_progress: called with ``(done, total)`` after each judgment, e.g. to move a progress bar.
        cache, retry: defaults for items that do not set their own.
        requests_per_minute: space all requests of the batch to stay under this rate.
        rate_limiter: a limiter shared beyond this batch (overrides ``requests_per_minute``).
    """
    work = _checked(items)
    limit = _limit(concurrency, work)
    limiter = rate_limiter or (RateLimiter(requests_per_minute) if requests_per_minute else None)
    shared = {"cache": cache, "retry": retry, "rate_limiter": limiter, "observer": observer_of(limit)}
    results: list[BatchResult | None] = [None] * len(work)
    done = 0

    async def judge(index: int) -> None:
        nonlocal done
        try:
            results[index] = await aevaluate_rubric(**{**shared, **work[index]})
        except Exception as exc:
            if not return_exceptions:
                raise
            results[index] = exc
        done += 1
        if on_progress is not None:
            on_progress(done, len(work))

    try:
        await run_bounded(range(len(work)), judge, concurrency=limit)
    finally:
        if isinstance(limit, AdaptiveLimit):
            await limit.aclose()
    return results  # type: ignore[return-value]  # every slot was filled or an error was raised


def _limit(concurrency: int | str, items: Sequence[Mapping[str, Any]]) -> Limit:
    """The batch's limit: a fixed number, or ``"auto"`` watching the judge's server when all items
    share one ``api_base``."""
    if isinstance(concurrency, str) and concurrency.strip().lower() == "auto":
        bases = {configured_api_base(item.get("model_info") or {}) or "" for item in items}
        base = bases.pop() if len(bases) == 1 else ""
        return concurrency_limit("auto", base_url=base or None)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise JudgeSettingError(f"concurrency must be a positive integer or 'auto', got {concurrency!r}")
    return concurrency_limit(concurrency)


evaluate_rubric_batch = synchronous(
    aevaluate_rubric_batch,
    "evaluate_rubric_batch",
    "Synchronous :func:`aevaluate_rubric_batch`: judge ``items`` concurrently, results in input order.",
)
