"""Scoring one output against a rubric with an LLM judge: ``aevaluate_rubric`` and ``evaluate_rubric``.

The arguments are checked in a fixed order — ``provider`` and ``model``, the API key, ``rubric`` and
``solution_str``, the score range, then the system prompt, original input and timeout — so a call
with several problems always reports the same one first. Then the prompt is built, the judge
called, and its verdict parsed and clamped. Along the way:

* a blank ``solution_str`` scores ``score_min`` without calling the judge: models do produce empty
  outputs during RL, and an exception there would stop a training run (non-strings still raise);
* ``timeout`` is one deadline for the whole judgment — connecting, receiving the reply, retries
  and the corrective re-ask — so a provider that drips its reply cannot stretch it (parsing is
  linear and capped in size, milliseconds within it);
* transient provider failures are retried with back-off, and a reply without a usable verdict
  (none, conflicting ones, or only ones copied from the quoted candidate) is answered once with a
  corrective message before giving up; the score is never taken from the candidate's own text;
* a score outside the range is clamped and the result says so (``clamped``, ``original_score``);
* ``cache=`` stores verdicts on disk (a failing cache is skipped with one warning, never fatal),
  ``rate_limiter=`` spaces requests, ``retry=`` tunes retries.

Deliberate differences from earlier releases are listed in docs/compatibility.md.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai._deadline import Deadline
from osmosis_ai._litellm import aimport_litellm
from osmosis_ai._sync import synchronous
from osmosis_ai.judge.cache import JudgmentCache, judgment_key, resolve_cache
from osmosis_ai.judge.call import JudgeRequest, complete
from osmosis_ai.judge.errors import JudgeInputError, ProviderRequestError, ScoreRangeError, VerdictError
from osmosis_ai.judge.keys import resolve_api_key
from osmosis_ai.judge.parsing import MAX_REPLY_CHARS, Verdict, clamp, parse_verdict, quoted_verdicts
from osmosis_ai.judge.prompt import PROMPT_VERSION, build_messages
from osmosis_ai.judge.ratelimit import RateLimiter
from osmosis_ai.judge.retry import RetryPolicy
from osmosis_ai.judge.routing import default_timeout, litellm_model_id, response_format, sends_temperature
from osmosis_ai.judge.types import ModelInfo, RewardRubricRunResult
from osmosis_ai.models.complete import Completion

if TYPE_CHECKING:
    from osmosis_ai.models.concurrency import CallObserver

CacheOption = JudgmentCache | str | os.PathLike[str] | bool | None

EMPTY_OUTPUT_EXPLANATION = (
    "The candidate output is empty; it was scored as the minimum without calling the judge."
)
_CORRECTION = (
    "Your previous reply could not be used: {problem}. Reply again with only the JSON object "
    '{{"score": <number>, "explanation": "<string>"}}.'
)
_DEFAULT_RETRY = RetryPolicy()


def _required_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise JudgeInputError(f"{what} must be a non-empty string, got {value!r}")
    return value.strip()


def _first_text(*values: Any) -> str | None:
    for value in values:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _score_bound(argument: float | None, model_info: Mapping[str, Any], key: str, default: float) -> float:
    value = argument if argument is not None else model_info.get(key)
    value = default if value is None else value
    try:
        bound = float(value)
    except (TypeError, ValueError):
        raise ScoreRangeError(f"{key} must be a number, got {value!r}") from None
    if not math.isfinite(bound):
        raise ScoreRangeError(f"{key} must be a finite number, got {value!r}")
    return bound


def _timeout(argument: float | None, configured: Any, provider: str, model: str) -> float:
    """The explicit ``timeout``, else ``model_info['timeout']`` if set, else the model's default."""
    value = argument if argument is not None else configured or None
    if value is None:
        return default_timeout(provider, model)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise JudgeInputError(f"timeout must be a number of seconds, got {value!r}") from None
    if not seconds > 0:
        raise JudgeInputError(f"timeout must be positive, got {value!r}")
    return seconds


@dataclass(frozen=True)
class _Plan:
    """A validated judgment: the request to send (``None`` for an empty output) and the range."""

    request: JudgeRequest | None
    score_min: float
    score_max: float


def _plan(
    rubric: Any,
    solution_str: Any,
    model_info: Any,
    *,
    ground_truth: str | None,
    original_input: str | None,
    metadata: dict[str, Any] | None,
    score_min: float | None,
    score_max: float | None,
    timeout: float | None,
) -> _Plan:
    if not isinstance(model_info, Mapping):
        raise JudgeInputError(f"model_info must be a mapping, got {type(model_info).__name__}")
    provider = _required_text(model_info.get("provider"), "model_info['provider']").lower()
    model = _required_text(model_info.get("model"), "model_info['model']")
    api_key = resolve_api_key(provider, model_info)
    rubric_text = _required_text(rubric, "rubric")
    if not isinstance(solution_str, str):
        raise JudgeInputError(f"solution_str must be a string, got {type(solution_str).__name__}")
    low = _score_bound(score_min, model_info, "score_min", 0.0)
    high = _score_bound(score_max, model_info, "score_max", 1.0)
    if high <= low:
        raise ScoreRangeError(f"score_max ({high}) must be greater than score_min ({low})")
    if not solution_str.strip():
        return _Plan(None, low, high)
    model_id = litellm_model_id(provider, model)
    original = _first_text(original_input, model_info.get("original_input"))
    messages = build_messages(
        rubric=rubric_text,
        solution_str=solution_str,
        score_min=low,
        score_max=high,
        system_prompt=_first_text(model_info.get("system_prompt")),
        original_input=original,
        ground_truth=ground_truth,
        metadata=metadata,
    )
    seconds = _timeout(timeout, model_info.get("timeout"), provider, model)
    request = JudgeRequest(
        provider=provider,
        model=model,
        model_id=model_id,
        messages=messages,
        timeout=seconds,
        response_format=response_format(model_id),
        api_key=api_key,
        api_base=_first_text(model_info.get("api_base")),
        reasoning_effort=model_info.get("reasoning_effort"),
        temperature=0.0 if sends_temperature(model) else None,
        quoted=quoted_verdicts((solution_str, ground_truth, original), metadata),
    )
    return _Plan(request, low, high)


def _cache_key(plan: _Plan, request: JudgeRequest) -> str:
    return judgment_key(
        {
            "prompt_version": PROMPT_VERSION,
            "model": request.model_id,
            "api_base": request.api_base,
            "format": request.response_format.get("type"),
            "temperature": request.temperature,
            "reasoning_effort": request.reasoning_effort,
            "range": [plan.score_min, plan.score_max],
            "messages": request.messages,
        }
    )


def _reply_text(reply: Completion) -> str:
    content = reply.message.get("content") if reply.message is not None else None
    if not isinstance(content, str) or not content.strip():
        raise VerdictError("the response did not include any content")
    return content.strip()


async def _ask(
    request: JudgeRequest, retry: RetryPolicy, limiter: RateLimiter | None, observer: CallObserver | None
) -> tuple[Verdict, Any, int]:
    """Call the judge until it gives a usable verdict (or the corrective retries or the time run out)."""
    deadline = Deadline.after(request.timeout)
    messages = request.messages
    for round_number in range(1, retry.malformed_retries + 2):
        reply = await complete(
            request, messages, retry=retry, limiter=limiter, deadline=deadline, observer=observer
        )
        content = ""
        try:
            content = _reply_text(reply)
            if len(content) > MAX_REPLY_CHARS:  # asking again would cost as much: not retried
                raise ProviderRequestError(
                    request.provider,
                    request.model,
                    f"the reply is {len(content)} characters long; at most {MAX_REPLY_CHARS} are read",
                )
            verdict = parse_verdict(content, structured=request.structured, quoted=request.quoted)
            return verdict, reply.raw, round_number
        except VerdictError as exc:
            if round_number > retry.malformed_retries:
                raise ProviderRequestError(request.provider, request.model, str(exc)) from exc
            correction = _CORRECTION.format(problem=exc)
            messages = [
                *request.messages,
                {"role": "assistant", "content": content},
                {"role": "user", "content": correction},
            ]
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _empty_output_result(plan: _Plan) -> RewardRubricRunResult:
    return {
        "score": plan.score_min,
        "explanation": EMPTY_OUTPUT_EXPLANATION,
        "raw": None,
        "clamped": False,
        "original_score": plan.score_min,
        "cached": False,
        "attempts": 0,
    }


async def _cached_verdict(cache: JudgmentCache | None, key: str) -> dict[str, Any] | None:
    """The stored verdict, or ``None``; a failing cache is logged and skipped, never fatal."""
    if cache is None:
        return None
    try:
        return await cache.aget(key)
    except (OSError, sqlite3.Error) as exc:
        cache.warn_unavailable(exc)
        return None


async def _store_verdict(cache: JudgmentCache | None, key: str, value: dict[str, Any]) -> None:
    """Keep a fresh verdict; the judgment stands even when the cache cannot store it."""
    if cache is None:
        return
    try:
        await cache.aput(key, value)
    except (OSError, sqlite3.Error) as exc:
        cache.warn_unavailable(exc)


async def _judge(
    plan: _Plan,
    request: JudgeRequest,
    cache: JudgmentCache | None,
    retry: RetryPolicy,
    limiter: RateLimiter | None,
    observer: CallObserver | None,
) -> RewardRubricRunResult:
    key = _cache_key(plan, request) if cache is not None else ""
    stored = await _cached_verdict(cache, key)
    if stored is not None:
        return {**stored, "cached": True, "attempts": 0}  # type: ignore[typeddict-item]
    verdict, raw, attempts = await _ask(request, retry, limiter, observer)
    score = clamp(verdict.score, plan.score_min, plan.score_max)
    result: RewardRubricRunResult = {
        "score": score,
        "explanation": verdict.explanation,
        "raw": raw,
        "clamped": score != verdict.score,
        "original_score": verdict.score,
    }
    await _store_verdict(cache, key, dict(result))
    return {**result, "cached": False, "attempts": attempts}


async def aevaluate_rubric(
    rubric: str,
    solution_str: str,
    model_info: ModelInfo | Mapping[str, Any],
    *,
    ground_truth: str | None = None,
    original_input: str | None = None,
    metadata: dict[str, Any] | None = None,
    score_min: float | None = None,
    score_max: float | None = None,
    timeout: float | None = None,
    return_details: bool = False,
    cache: CacheOption = None,
    retry: RetryPolicy | None = None,
    rate_limiter: RateLimiter | None = None,
    observer: CallObserver | None = None,
) -> float | RewardRubricRunResult:
    """Score ``solution_str`` against ``rubric`` with the LLM judge described by ``model_info``.

    Returns the score (a float in ``[score_min, score_max]``), or with ``return_details=True`` the
    full :class:`RewardRubricRunResult`.

    Args:
        cache: ``True`` for the shared on-disk judgment cache, a path or a
            :class:`~osmosis_ai.judge.cache.JudgmentCache` for a specific one; off by default.
        retry: retry limits and back-off (default :class:`~osmosis_ai.judge.retry.RetryPolicy`).
        rate_limiter: a :class:`~osmosis_ai.judge.ratelimit.RateLimiter` shared with other calls.
        observer: an adaptive concurrency limit (:mod:`osmosis_ai.models.concurrency`) to tell how
            each request to the judge ended (``evaluate_rubric_batch(concurrency="auto")`` passes one).

    Raises:
        JudgeInputError: (a ``TypeError``) a required argument is missing or not a string, or
            ``cache`` is not one of the accepted kinds.
        MissingAPIKeyError: the provider needs an API key and none is configured.
        ScoreRangeError: (a ``ValueError``) the score range is empty, not numeric or not finite.
        ModelNotFoundError: the provider does not know the model.
        ProviderRequestError: the call failed or the judge gave no usable verdict.
    """
    await aimport_litellm()  # the first import takes seconds: not on the event loop
    plan = _plan(
        rubric,
        solution_str,
        model_info,
        ground_truth=ground_truth,
        original_input=original_input,
        metadata=metadata,
        score_min=score_min,
        score_max=score_max,
        timeout=timeout,
    )
    if plan.request is None:
        result = _empty_output_result(plan)
    else:
        request = plan.request
        judgment_cache = resolve_cache(cache)  # outside the try: a bad ``cache`` is not a provider error
        try:
            result = await _judge(
                plan, request, judgment_cache, retry or _DEFAULT_RETRY, rate_limiter, observer
            )
        except ProviderRequestError:
            raise
        except Exception as exc:
            detail = str(exc) or f"{type(exc).__name__} encountered while contacting provider."
            raise ProviderRequestError(request.provider, request.model, detail) from exc
    return result if return_details else result["score"]


evaluate_rubric = synchronous(
    aevaluate_rubric,
    "evaluate_rubric",
    "Synchronous :func:`aevaluate_rubric` (same arguments, result and errors); blocks until judged.",
)
