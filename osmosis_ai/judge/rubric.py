"""A rubric judging one answer: the rubric as configured (:class:`RubricConfig`), the record judged
(:class:`RubricRecord`), what the judge is called with, and how its reply or failure reads.

The judge's arguments come from the config with the record's values in its place
(:func:`judge_arguments`). A custom rubric function that declares neither ``rubric``/``model_info``
nor ``**kwargs`` is called with the parameters it names among ``solution_str``, ``ground_truth`` and
``extra_info`` (:func:`custom_arguments`); its ``extra_info`` carries the judge settings with the
*name* of the key variable, never the key. :func:`failure_outcome` types a judgment that raised.
"""

from __future__ import annotations

import copy
import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from osmosis_ai.outcome import Outcome

PREVIEW_LIMIT = 140
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class RubricConfig:
    """One rubric entry with its document's defaults applied."""

    rubric_id: str
    rubric_text: str
    model_info: dict[str, Any]
    score_min: float | None
    score_max: float | None
    system_prompt: str | None
    original_input: str | None
    ground_truth: str | None
    source_label: str


@dataclass(frozen=True)
class RubricRecord:
    """One answer to judge: ``payload`` is its dataset object as written (empty for an answer that
    has none), the other fields what the judge takes from it."""

    line_number: int
    payload: dict[str, Any]
    solution_str: str
    rubric_id: str
    conversation_id: str | None
    ground_truth: str | None
    original_input: str | None
    metadata: dict[str, Any] | None
    extra_info: dict[str, Any] | None
    score_min: float | None
    score_max: float | None

    @classmethod
    def answer(cls, number: int, solution: str, ground_truth: Any) -> RubricRecord:
        """An answer with nothing else to go with it but its ground truth."""
        truth = None if ground_truth is None else str(ground_truth)
        return cls(number, {}, solution, "", None, truth, None, None, None, None, None)


class RecordRefused(ValueError):
    """A dataset object that is no rubric record; the message says which field is wrong."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bound(value: Any, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordRefused(f"'{key}' must be a number, got {value!r}")
    if not math.isfinite(value):
        raise RecordRefused(f"'{key}' must be a finite number, got {value!r}")
    return float(value)


def record_of(number: int, payload: dict[str, Any]) -> RubricRecord:
    """The record of dataset object ``payload`` (line ``number``), or :class:`RecordRefused`."""
    solution = payload.get("solution_str")
    if not isinstance(solution, str) or not solution.strip():
        raise RecordRefused("'solution_str' must be a non-empty string")
    metadata, extra_info, rubric_id = (
        payload.get("metadata"),
        payload.get("extra_info"),
        payload.get("rubric_id"),
    )
    return RubricRecord(
        line_number=number,
        payload=payload,
        solution_str=solution,
        rubric_id=rubric_id if isinstance(rubric_id, str) else "",
        conversation_id=_text(payload.get("conversation_id")),
        ground_truth=_text(payload.get("ground_truth")),
        original_input=_text(payload.get("original_input")),
        metadata=metadata if isinstance(metadata, dict) else None,
        extra_info=extra_info if isinstance(extra_info, dict) else None,
        score_min=_bound(payload.get("score_min"), "score_min"),
        score_max=_bound(payload.get("score_max"), "score_max"),
    )


def preview_text(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...``."""
    collapsed = _WHITESPACE.sub(" ", text).strip()
    return collapsed if len(collapsed) <= limit else collapsed[: limit - 3].rstrip() + "..."


@dataclass(frozen=True)
class JudgeArguments:
    """What one judgment of a record receives: the judge's keywords, and the record's extra_info."""

    judge: dict[str, Any]
    extra_info: dict[str, Any]


def judge_arguments(config: RubricConfig, record: RubricRecord) -> JudgeArguments:
    """The judge's arguments for ``record``: its values, else the config's."""
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
    return JudgeArguments(judge, extra_info)


def custom_arguments(function: Callable[..., Any], arguments: JudgeArguments) -> dict[str, Any]:
    """The keywords a custom rubric function is called with (see the module docstring)."""
    parameters = inspect.signature(function).parameters
    if any(p.kind is p.VAR_KEYWORD or p.name in ("rubric", "model_info") for p in parameters.values()):
        return {**arguments.judge, "return_details": True}
    judge = arguments.judge
    model_info = {k: v for k, v in judge["model_info"].items() if k != "api_key"}
    provider = str(model_info.get("provider") or "").strip().lower()
    if provider and not model_info.get("api_key_env"):
        from osmosis_ai.judge.keys import default_key_env

        model_info["api_key_env"] = default_key_env(provider)
    extra_info = {
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
    available = {
        "solution_str": judge["solution_str"],
        "ground_truth": judge["ground_truth"],
        "extra_info": extra_info,
    }
    return {k: v for k, v in available.items() if k in parameters}


@dataclass(frozen=True)
class Judgment:
    """What a judge's reply says: the score as returned (the score rule checks it), the explanation,
    a one-line preview, the raw reply, and whether the judgment cache served it."""

    score: Any
    explanation: str | None
    preview: str
    raw: Any
    cached: bool


def judgment_of(reply: Any, solution: str) -> Judgment:
    """Read a judge's (or a custom rubric function's) reply: a details mapping, or a bare score."""
    if not isinstance(reply, Mapping):
        return Judgment(reply, None, preview_text(solution), reply, False)
    explanation = reply.get("explanation")
    text = explanation.strip() if isinstance(explanation, str) and explanation.strip() else None
    raw = reply.get("raw")
    preview = reply.get("preview")
    if not isinstance(preview, str) and isinstance(raw, dict):
        preview = next((raw[k] for k in ("preview", "summary", "text") if isinstance(raw.get(k), str)), None)
    shown = preview_text(preview) if isinstance(preview, str) else preview_text(solution)
    return Judgment(reply.get("score"), text, shown, raw, reply.get("cached") is True)


def failure_outcome(exc: BaseException, *, judge: bool) -> Outcome:
    """The outcome of a judgment that raised ``exc``; ``judge`` says the SDK's judge made the call.

    The judge reports provider failures as its own errors with the provider's exception as the
    cause, and it has already retried what was worth retrying: what is left is either the provider
    or the network failing (infrastructure) or the model's answer being unusable.
    """
    import asyncio

    from osmosis_ai.judge.errors import MissingAPIKeyError, ProviderRequestError
    from osmosis_ai.models.providers import classify_provider_error

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
