"""A rubric reward: an LLM judge scores each answer through ``evaluate_rubric``.

``@osmosis_rubric`` checks the signature when this module is imported and the arguments and score
on every call. The judge is chosen per sample from ``extra_info["metadata"]["provider_profile"]``
(``openai`` by default); each profile reads its key from the provider's usual variable
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...). To judge with a local OpenAI-compatible server
instead, set ``JUDGE_API_BASE`` (for example ``http://127.0.0.1:8000/v1``) and ``JUDGE_MODEL``.

Run ``python examples/rubric_functions.py``: profiles without a configured key are skipped.
"""

from __future__ import annotations

import os
from typing import Any

from osmosis_ai import (
    MissingAPIKeyError,
    ModelNotFoundError,
    ProviderRequestError,
    evaluate_rubric,
    osmosis_rubric,
)

RUBRIC = (
    "Score 1.0 when the answer is correct, complete and states the final result plainly; 0.5 when "
    "it is correct but padded or hedged; 0.0 when it is wrong or does not answer."
)

PROFILES: dict[str, dict[str, Any]] = {
    "openai": {"provider": "openai", "model": "gpt-5-mini"},
    "anthropic": {"provider": "anthropic", "model": "claude-sonnet-4-5-20250929"},
    "gemini": {"provider": "gemini", "model": "gemini-2.5-flash"},
    "xai": {"provider": "xai", "model": "grok-4-fast-non-reasoning"},
    "openrouter": {"provider": "openrouter", "model": "openai/gpt-5-mini"},
    "cerebras": {"provider": "cerebras", "model": "llama-3.3-70b"},
}


def judge_for(extra_info: dict[str, Any] | None) -> dict[str, Any]:
    """The ``model_info`` for this sample: its provider profile, or a local server if configured."""
    api_base = os.environ.get("JUDGE_API_BASE")
    if api_base:
        return {"provider": "openai", "model": os.environ.get("JUDGE_MODEL", "judge"), "api_base": api_base}
    metadata = (extra_info or {}).get("metadata") or {}
    return dict(PROFILES.get(str(metadata.get("provider_profile", "openai")), PROFILES["openai"]))


@osmosis_rubric
def helpfulness_rubric(solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs: Any) -> float:
    """Ask the judge how well ``solution_str`` answers, with ``ground_truth`` as the reference."""
    details = bool((extra_info or {}).get("capture_details"))
    result = evaluate_rubric(
        RUBRIC,
        solution_str,
        judge_for(extra_info),  # type: ignore[arg-type]
        ground_truth=ground_truth,
        original_input=(extra_info or {}).get("question"),
        score_min=0.0,
        score_max=1.0,
        return_details=details,
    )
    if isinstance(result, dict):
        extra_info["judge_explanation"] = result["explanation"]
        return result["score"]
    return result


def main() -> None:
    question = "What is 17 * 3?"
    for profile in PROFILES:
        extra_info = {
            "question": question,
            "metadata": {"provider_profile": profile},
            "capture_details": True,
        }
        try:
            score = helpfulness_rubric("17 * 3 = 51.", "51", extra_info)
        except (MissingAPIKeyError, ModelNotFoundError) as exc:
            print(f"{profile:<11} skipped: {str(exc).splitlines()[0]}")
            continue
        except ProviderRequestError as exc:
            print(f"{profile:<11} failed: {exc.detail}")
            continue
        print(f"{profile:<11} score={score:.2f} {extra_info.get('judge_explanation', '')}")
        if os.environ.get("JUDGE_API_BASE"):
            break


if __name__ == "__main__":
    main()
