"""A rubric's LLM judge as one of a run's score functions (:func:`judge_function`), named by a plan's
:class:`RubricJudge`: the judge is a :class:`~osmosis_ai.runs.scorer.ScoreFn` in the pipeline, its
value checked by the one score rule like any other (a NaN from a custom rubric function is a
``reward_error``).

What is judged is the attempt's last assistant message; the rest of the record is the executor's
:class:`~osmosis_ai.judge.rubric.RubricRecord` when it made one (eval-rubric's dataset), else the
answer with its ground truth (the attempt's :class:`~osmosis_ai.rewards.runtime.Sample`'s, or the
row's ``ground_truth``). A judgment that raises ends the item as
:func:`~osmosis_ai.judge.rubric.failure_outcome` says (a provider or network failure is
``infra_error``/``timeout``, an unusable answer ``model_error``). Only the first model tag's items
(``primary``) may use the judgment cache, never a repeat: a cached judgment would hide the variance
repeats measure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from osmosis_ai.judge.rubric import RubricConfig, RubricRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from osmosis_ai._usercode import UserThreads
    from osmosis_ai.judge.retry import RetryPolicy
    from osmosis_ai.models.concurrency import CallObserver
    from osmosis_ai.runs.items import WorkItem
    from osmosis_ai.runs.result import Attempt
    from osmosis_ai.runs.scorer import ScoreFn

JUDGE = "score"
"""The judge's score name; it is the item's reward."""
JUDGMENT = "judgment"
"""The record key of a judgment's details (with :attr:`RubricJudge.details`)."""
JUDGE_CONCURRENCY = 8
"""Judgments in flight unless told otherwise: a judge is a provider's rate limit away from failing."""


@dataclass(frozen=True)
class RubricJudge:
    """The judge of ``config`` (its file's digest names it in a journal: ``digest``), through the
    judgment cache when ``cache``, at most ``requests_per_minute`` per process when given; with
    ``details``, each record keeps the judgment's explanation, preview, raw reply and timing."""

    config: RubricConfig
    digest: str
    cache: bool = False
    requests_per_minute: float | None = None
    details: bool = False


def judge_function(
    judge: RubricJudge,
    *,
    observer: CallObserver | None = None,
    evaluate_fn: Callable[..., Any] | None = None,
    retry: RetryPolicy | None = None,
) -> ScoreFn:
    """The score function judging with ``judge`` (see the module docstring). ``observer`` (an
    ``auto`` concurrency limit) hears how each judge request ended; ``evaluate_fn`` is a custom
    rubric function called in the judge's place, ``retry`` the judge's retry policy."""
    from osmosis_ai._usercode import call_user
    from osmosis_ai.errors import OsmosisError
    from osmosis_ai.judge.evaluate import aevaluate_rubric
    from osmosis_ai.judge.ratelimit import RateLimiter
    from osmosis_ai.judge.rubric import (
        custom_arguments,
        failure_outcome,
        judge_arguments,
        judgment_of,
        preview_text,
    )
    from osmosis_ai.rewards.runtime import Sample
    from osmosis_ai.runs.journal import PRIMARY
    from osmosis_ai.runs.scorer import ScoreFailure, ScoreFn

    limiter = RateLimiter(judge.requests_per_minute) if judge.requests_per_minute else None
    options: dict[str, Any] = {"retry": retry, "rate_limiter": limiter, "observer": observer}

    def record_of(item: WorkItem, attempt: Attempt) -> RubricRecord:
        if isinstance(attempt.source, RubricRecord):
            return attempt.source
        answer = next(m for m in reversed(attempt.final_messages) if m.get("role") == "assistant")
        source = attempt.source
        truth = source.ground_truth if isinstance(source, Sample) else item.row.get("ground_truth")
        return RubricRecord.answer(item.row_index + 1, str(answer.get("content") or ""), truth)

    async def call(item: WorkItem, record: RubricRecord) -> Any:
        arguments = judge_arguments(judge.config, record)
        if evaluate_fn is None:
            cache = judge.cache and item.model_tag == PRIMARY
            return await aevaluate_rubric(
                **arguments.judge, return_details=True, cache=cache or None, **options
            )
        return await call_user(evaluate_fn, **custom_arguments(evaluate_fn, arguments))

    async def score(item: WorkItem, attempt: Attempt, threads: UserThreads | None) -> Any:
        record = record_of(item, attempt)
        started, clock = datetime.now(timezone.utc), time.perf_counter()
        details: dict[str, Any] = {"started_at": started.isoformat()}

        def keep(**values: Any) -> None:
            details.update(values, duration_seconds=time.perf_counter() - clock)
            details["completed_at"] = datetime.now(timezone.utc).isoformat()
            if judge.details:
                attempt.extra[JUDGMENT] = details

        try:
            reply = await call(item, record)
        except Exception as exc:
            message = str(exc) if isinstance(exc, OsmosisError) else f"{type(exc).__name__}: {exc}"
            keep(
                status="error",
                explanation=None,
                preview=preview_text(record.solution_str),
                raw=None,
                cached=False,
            )
            raise ScoreFailure(failure_outcome(exc, judge=evaluate_fn is None), message) from None
        judged = judgment_of(reply, record.solution_str)
        keep(status="success", explanation=judged.explanation, preview=judged.preview, raw=judged.raw,
             cached=judged.cached)  # fmt: skip
        return judged.score

    return ScoreFn(JUDGE, score)
