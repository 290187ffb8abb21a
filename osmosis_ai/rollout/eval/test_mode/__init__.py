"""Legacy import path of ``osmosis test``'s library parts, over :mod:`osmosis_ai.evaluation`."""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "ExternalLLMClient": "osmosis_ai.rollout.eval.common.llm_client",
    "ProviderError": "osmosis_ai.rollout.eval.common.errors",
    "InteractiveLLMClient": "osmosis_ai.rollout.eval.test_mode.interactive",
    "InteractiveStep": "osmosis_ai.rollout.eval.test_mode.interactive",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
