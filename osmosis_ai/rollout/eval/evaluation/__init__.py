"""Legacy import path of ``osmosis eval``'s library parts, over :mod:`osmosis_ai.evaluation`."""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "EvalFnError": "osmosis_ai.rollout.eval.evaluation.eval_fn",
    "EvalFnWrapper": "osmosis_ai.rollout.eval.evaluation.eval_fn",
    "load_eval_fn": "osmosis_ai.rollout.eval.evaluation.eval_fn",
    "load_eval_fns": "osmosis_ai.rollout.eval.evaluation.eval_fn",
    "pass_at_k": "osmosis_ai.rollout.eval.evaluation.report",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
