"""Policy backends of the local TrainGate: LiteLLM/OpenAI-compatible models, the scripted solver, the bench's canned turns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from osmosis_ai.traingate.policy.base import Generation, Policy

if TYPE_CHECKING:
    from osmosis_ai.models.concurrency import CallObserver

__all__ = ["Generation", "Policy", "make_policy"]


def make_policy(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    request_token_ids: bool = False,
    observer: CallObserver | None = None,
) -> Policy:
    """``"scripted"`` -> the offline calculator solver; anything else -> a model through the model seam.

    ``request_token_ids`` makes an OpenAI-compatible server behind ``base_url`` return its token ids;
    ``observer`` (an adaptive concurrency limit) hears how each backend request ended.

    Raises:
        ModelRouteError: ``"scripted"`` with a ``base_url`` (the solver is offline).
    """
    from osmosis_ai.models.complete import SCRIPTED, route

    if model.strip() == SCRIPTED:
        from osmosis_ai.traingate.policy.scripted import ScriptedPolicy

        route(model, api_base=base_url)  # refuses a base URL
        return ScriptedPolicy()
    from osmosis_ai.traingate.policy.litellm import LiteLLMPolicy

    return LiteLLMPolicy(
        model,
        base_url=base_url,
        api_key=api_key,
        request_token_ids=request_token_ids and bool(base_url),
        observer=observer,
    )
