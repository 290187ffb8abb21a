"""Typed dictionaries describing a judge (``ModelInfo``) and its verdict (``RewardRubricRunResult``)."""

from __future__ import annotations

from typing import Any, TypedDict


class ModelInfo(TypedDict, total=False):
    """Which judge to call and how; every key is optional except ``provider`` and ``model``.

    ``api_base`` points at any OpenAI-compatible server (vLLM, SGLang, Ollama, a proxy); with it,
    or for key-less providers such as ``ollama``, no API key is needed.
    """

    provider: str
    model: str
    api_key: str
    api_key_env: str
    api_base: str
    score_min: float
    score_max: float
    system_prompt: str | None
    original_input: str | None
    timeout: float
    reasoning_effort: str | None


class _RunDetails(TypedDict, total=False):
    clamped: bool
    original_score: float
    cached: bool
    attempts: int


class RewardRubricRunResult(_RunDetails):
    """A verdict: the (clamped) ``score``, the judge's ``explanation`` and the ``raw`` provider reply.

    Beyond those three keys, ``clamped`` says whether the judge's score fell outside the
    range (``original_score`` keeps what it said), ``cached`` whether it came from the judgment
    cache, and ``attempts`` how many provider calls it took.
    """

    score: float
    explanation: str
    raw: Any
