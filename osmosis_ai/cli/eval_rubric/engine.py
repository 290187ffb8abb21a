"""Scoring dataset records with a rubric config, ``number`` times each, concurrently.

The engine turns a :class:`~osmosis_ai.cli.eval_rubric.config.RubricConfig` and a
:class:`~osmosis_ai.cli.eval_rubric.dataset.RubricRecord` into judge arguments (record values override the
config's), runs every ``(record, run)`` pair on the SDK's one bounded pool (``concurrency`` at
once, :func:`osmosis_ai._pool.run_bounded`), and records each outcome as an :class:`EvaluationRun`. A failed run is recorded, never raised, so
one bad record does not lose the others. Each run also ends in a typed
:class:`~osmosis_ai.outcome.Outcome`: a judge call the provider could not serve (after the
judge's own retries) is ``infra_error``/``timeout`` when the provider or the network failed and
``model_error`` when the model's answer was unusable; a custom rubric function that raises is a
``reward_error``. A judgment served from the judgment cache is marked ``cached``.

The evaluate function defaults to :func:`~osmosis_ai.judge.evaluate.aevaluate_rubric`. A custom
rubric function (sync or async, called the SDK's one way: :func:`osmosis_ai._usercode.call_user`) that declares neither ``rubric``/``model_info`` nor ``**kwargs`` is
called with the parameters it names among ``solution_str``, ``ground_truth`` and ``extra_info``;
its ``extra_info`` carries the judge settings with the *name* of the key variable, never the key.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import math
import re
import statistics as stats
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from osmosis_ai._pool import run_bounded
from osmosis_ai._usercode import call_user
from osmosis_ai.cli.eval_rubric.config import RubricConfig
from osmosis_ai.cli.eval_rubric.dataset import RubricRecord
from osmosis_ai.cli.output import progress_bar, wants_progress
from osmosis_ai.errors import OsmosisError
from osmosis_ai.judge.errors import JudgeSettingError, MissingAPIKeyError, ProviderRequestError
from osmosis_ai.judge.evaluate import CacheOption, aevaluate_rubric
from osmosis_ai.judge.keys import default_key_env
from osmosis_ai.judge.ratelimit import RateLimiter
from osmosis_ai.judge.retry import RetryPolicy
from osmosis_ai.models.concurrency import CallObserver
from osmosis_ai.models.providers import classify_provider_error
from osmosis_ai.outcome import Outcome

PREVIEW_LIMIT = 140
_WHITESPACE = re.compile(r"\s+")


def preview_text(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...``."""
    collapsed = _WHITESPACE.sub(" ", text).strip()
    return collapsed if len(collapsed) <= limit else collapsed[: limit - 3].rstrip() + "..."


@dataclass
class EvaluationRun:
    """The outcome of one judgment of one record."""

    run_index: int
    status: str
    score: float | None
    explanation: str | None
    preview: str | None
    duration_seconds: float
    started_at: datetime
    completed_at: datetime
    error: str | None = None
    raw: Any = None
    outcome: Outcome = Outcome.COMPLETED
    cached: bool = False


@dataclass
class RecordResult:
    """A record, where it sits in the selection, and its runs in order."""

    record: RubricRecord
    record_index: int
    label: str
    record_id: str
    runs: list[EvaluationRun] = field(default_factory=list)


def scores_of(runs: list[EvaluationRun]) -> list[float]:
    """The scores of the successful runs (a success without a numeric score does not count)."""
    return [run.score for run in runs if run.status == "success" and run.score is not None]


def compute_statistics(runs: list[EvaluationRun]) -> dict[str, Any]:
    """Mean, population variance/stdev, min, max of the successful scores, plus run counts."""
    scores = scores_of(runs)
    summary: dict[str, Any] = {"average": 0.0, "variance": 0.0, "stdev": 0.0, "min": 0.0, "max": 0.0}
    if scores:
        variance = stats.pvariance(scores)
        summary.update(
            average=stats.fmean(scores),
            variance=variance,
            stdev=math.sqrt(variance),
            min=min(scores),
            max=max(scores),
        )
    summary.update(total_runs=len(runs), success_count=len(scores), failure_count=len(runs) - len(scores))
    return summary


def _record_identity(record: RubricRecord, position: int) -> tuple[str, str]:
    label = record.conversation_id or f"record[{position}]"
    raw_id = record.payload.get("id")
    if isinstance(raw_id, str) and raw_id.strip():
        return label, raw_id.strip()
    return label, label if raw_id is None or isinstance(raw_id, str) else str(raw_id)


def _takes_judge_arguments(function: Callable[..., Any]) -> bool:
    parameters = inspect.signature(function).parameters.values()
    return any(p.kind is p.VAR_KEYWORD or p.name in ("rubric", "model_info") for p in parameters)


@dataclass(frozen=True)
class _Arguments:
    """What one judgment of a record receives."""

    judge: dict[str, Any]
    extra_info: dict[str, Any]


def _arguments(config: RubricConfig, record: RubricRecord) -> _Arguments:
    model_info = copy.deepcopy(config.model_info)
    prompts = [
        p.strip() for p in (config.system_prompt, model_info.get("system_prompt")) if isinstance(p, str)
    ]
    joined = "\n\n".join(p for p in prompts if p)
    if joined:
        model_info["system_prompt"] = joined
    else:
        model_info.pop("system_prompt", None)
    extra_info = copy.deepcopy(record.extra_info) if record.extra_info else {}
    if record.metadata:
        extra_info.setdefault("dataset_metadata", record.metadata)
    quoted = dict(extra_info["metadata"]) if isinstance(extra_info.get("metadata"), dict) else {}
    if record.metadata:
        quoted["dataset_metadata"] = record.metadata
    extra_original = extra_info.get("original_input")
    original = record.original_input
    if original is None:
        original = extra_original if isinstance(extra_original, str) else config.original_input
    judge = {
        "rubric": config.rubric_text,
        "solution_str": record.solution_str,
        "model_info": model_info,
        "ground_truth": record.ground_truth if record.ground_truth is not None else config.ground_truth,
        "original_input": original,
        "metadata": quoted or None,
        "score_min": record.score_min if record.score_min is not None else config.score_min,
        "score_max": record.score_max if record.score_max is not None else config.score_max,
    }
    return _Arguments(judge, extra_info)


def _custom_extra_info(arguments: _Arguments) -> dict[str, Any]:
    """Context for a user's rubric function: judge settings with the key variable's name, not the key."""
    judge = arguments.judge
    model_info = {k: v for k, v in judge["model_info"].items() if k != "api_key"}
    provider = str(model_info.get("provider") or "").strip().lower()
    if provider and not model_info.get("api_key_env"):
        model_info["api_key_env"] = default_key_env(provider)
    return {
        **arguments.extra_info,
        "provider": provider,
        "model": model_info.get("model"),
        "api_key_env": model_info.get("api_key_env"),
        "rubric": judge["rubric"],
        "score_min": judge["score_min"],
        "score_max": judge["score_max"],
        "system_prompt": model_info.get("system_prompt"),
        "original_input": judge["original_input"],
        "model_info": model_info,
        "metadata": judge["metadata"],
    }


def _outcome(result: Any, record: RubricRecord) -> tuple[float | None, str | None, str | None, Any]:
    """``(score, explanation, preview, raw)`` from what the evaluate function returned."""
    if isinstance(result, dict):
        score = result.get("score")
        numeric = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
        explanation = result.get("explanation")
        text = explanation.strip() if isinstance(explanation, str) and explanation.strip() else None
        raw = result.get("raw")
        preview = result.get("preview")
        if not isinstance(preview, str) and isinstance(raw, dict):
            preview = next(
                (raw[k] for k in ("preview", "summary", "text") if isinstance(raw.get(k), str)), None
            )
        shown = preview_text(preview) if isinstance(preview, str) else preview_text(record.solution_str)
        return numeric, text, shown, raw
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        return float(result), None, preview_text(record.solution_str), result
    return None, None, preview_text(record.solution_str), result


def failure_outcome(exc: BaseException, *, judge: bool) -> Outcome:
    """The outcome of a judgment that raised ``exc``; ``judge`` says the SDK's judge made the call.

    The judge reports provider failures as its own errors with the provider's exception as the
    cause, and it has already retried what was worth retrying: what is left is either the provider
    or the network failing (infrastructure) or the model's answer being unusable.
    """
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return Outcome.TIMEOUT
    if not judge:
        return Outcome.REWARD_ERROR
    if isinstance(exc, MissingAPIKeyError):
        return Outcome.INFRA_ERROR
    cause = exc.__cause__ if isinstance(exc, ProviderRequestError) and exc.__cause__ is not None else exc
    if isinstance(cause, (TimeoutError, asyncio.TimeoutError)):
        return Outcome.TIMEOUT
    failure = classify_provider_error(cause)
    if failure.kind == "timeout":
        return Outcome.TIMEOUT
    if failure.systemic or failure.kind in ("rate_limit", "server"):
        return Outcome.INFRA_ERROR
    return Outcome.MODEL_ERROR


class RubricEvaluationEngine:
    """Runs a rubric over records; construction is cheap, :meth:`run` does the work."""

    def __init__(
        self,
        evaluate_fn: Callable[..., Any] | None = None,
        *,
        concurrency: int = 8,
        progress: bool | None = None,
        cache: CacheOption = None,
        retry: RetryPolicy | None = None,
        rate_limiter: RateLimiter | None = None,
        observer: CallObserver | None = None,
    ) -> None:
        """``observer`` (an adaptive concurrency limit) hears how each request to the judge ended."""
        if concurrency < 1:
            raise JudgeSettingError(f"concurrency must be at least 1, got {concurrency}")
        self.evaluate_fn = evaluate_fn or aevaluate_rubric
        self.concurrency = concurrency
        self.progress = progress
        self.judge_options: dict[str, Any] = {
            "cache": cache, "retry": retry, "rate_limiter": rate_limiter, "observer": observer
        }  # fmt: skip

    async def _call(self, config: RubricConfig, record: RubricRecord) -> Any:
        arguments = _arguments(config, record)
        function: Callable[..., Any] = self.evaluate_fn
        if function is aevaluate_rubric:
            return await aevaluate_rubric(**arguments.judge, return_details=True, **self.judge_options)
        if _takes_judge_arguments(function):
            kwargs: dict[str, Any] = {**arguments.judge, "return_details": True}
        else:
            available = {
                "solution_str": arguments.judge["solution_str"],
                "ground_truth": arguments.judge["ground_truth"],
                "extra_info": _custom_extra_info(arguments),
            }
            kwargs = {k: v for k, v in available.items() if k in inspect.signature(function).parameters}
        return await call_user(function, **kwargs)

    async def run_once(self, config: RubricConfig, record: RubricRecord, run_index: int) -> EvaluationRun:
        """One judgment of ``record`` (its ``run_index``), recorded whatever happened: never raises."""
        started_at = datetime.now(timezone.utc)
        clock = time.perf_counter()
        error: str | None = None
        cached = False
        try:
            result = await self._call(config, record)
            score, explanation, preview, raw = _outcome(result, record)
            status = "success"
            outcome = Outcome.COMPLETED if score is not None else Outcome.REWARD_ERROR
            cached = isinstance(result, dict) and result.get("cached") is True
        except Exception as exc:
            judge = self.evaluate_fn is aevaluate_rubric
            message = str(exc) if isinstance(exc, OsmosisError) else f"{type(exc).__name__}: {exc}"
            status, error, score, explanation, raw = "error", message, None, None, None
            preview = preview_text(record.solution_str)
            outcome = failure_outcome(exc, judge=judge)
        return EvaluationRun(
            run_index=run_index,
            status=status,
            score=score,
            explanation=explanation,
            preview=preview,
            duration_seconds=time.perf_counter() - clock,
            started_at=started_at,
            completed_at=datetime.now(timezone.utc),
            error=error,
            raw=raw,
            outcome=outcome,
            cached=cached,
        )

    async def run(self, config: RubricConfig, records: list[RubricRecord], number: int) -> list[RecordResult]:
        """Judge each record ``number`` times; results keep record and run order."""
        results = []
        for position, record in enumerate(records, start=1):
            label, record_id = _record_identity(record, position)
            results.append(RecordResult(record, position, label, record_id, [None] * number))  # type: ignore[list-item]
        jobs = [(result, run) for result in results for run in range(number)]
        total = len(jobs)

        with progress_bar(
            total, f"Rubric '{config.rubric_id}'", enabled=wants_progress(self.progress, total)
        ) as advance:

            async def judge(job: tuple[RecordResult, int]) -> None:
                result, run = job
                judged = result.runs[run] = await self.run_once(config, result.record, run + 1)
                advance(score=judged.score, failed=judged.status != "success")

            await run_bounded(jobs, judge, concurrency=self.concurrency)
        return results
