"""``evaluate_rubric`` with 0.3's signature, over :func:`osmosis_ai.judge.evaluate.aevaluate_rubric`."""

from __future__ import annotations

from typing import Any

from osmosis_ai.eval.rubric.types import RubricResult
from osmosis_ai.judge.errors import JudgeInputError
from osmosis_ai.judge.evaluate import aevaluate_rubric
from osmosis_ai.judge.types import ModelInfo

# Bare model names whose provider 0.3 infers; any other model is written "provider/model".
_FAMILIES = (
    (("gpt-", "o1-", "o3-", "o4-"), "openai"),
    (("claude",), "anthropic"),
    (("gemini",), "gemini"),
    (("grok",), "xai"),
)


def _split_model(model: str) -> tuple[str, str]:
    """``(provider, model)`` for ``"provider/model"``, or a bare name of a family 0.3 recognises."""
    if not isinstance(model, str) or not model.strip():
        raise JudgeInputError("'model' must be a non-empty string such as 'openai/gpt-5-mini'")
    provider, sep, name = model.strip().partition("/")
    if sep and provider and name:
        return provider.lower(), name
    bare = model.strip().lower()
    for prefixes, family in _FAMILIES:
        if bare.startswith(prefixes):
            return family, model.strip()
    raise JudgeInputError(f"cannot tell the provider of model {model!r}: write it as 'provider/model'")


async def evaluate_rubric(
    *,
    solution_str: str,
    rubric: str,
    model: str,
    ground_truth: str | None = None,
    original_input: str | None = None,
    metadata: dict[str, Any] | None = None,
    score_min: float = 0.0,
    score_max: float = 1.0,
    api_key: str | None = None,
    timeout: float | None = None,
    system_prompt: str | None = None,
) -> RubricResult:
    """Score ``solution_str`` against ``rubric`` with the judge ``model`` (``"provider/model"``).

    ``api_key`` defaults to the provider's environment variable, ``timeout`` to the provider's
    usual wait; ``system_prompt`` is added to the judge's instructions. Errors are the judge's:
    ``MissingAPIKeyError``, ``ProviderRequestError`` (``ModelNotFoundError``), and ``TypeError`` /
    ``ValueError`` subclasses for bad arguments.
    """
    provider, name = _split_model(model)
    model_info: ModelInfo = {"provider": provider, "model": name, "system_prompt": system_prompt}
    if api_key is not None:
        model_info["api_key"] = api_key
    verdict = await aevaluate_rubric(
        rubric,
        solution_str,
        model_info,
        ground_truth=ground_truth,
        original_input=original_input,
        metadata=metadata,
        score_min=score_min,
        score_max=score_max,
        timeout=timeout,
        return_details=True,
    )
    assert isinstance(verdict, dict)  # return_details=True
    return RubricResult(score=float(verdict["score"]), explanation=str(verdict["explanation"]))
