"""Local TrainGate: a trainer stand-in that drives any rollout server end to end.

It speaks the production protocol (init, chat completions with token ids, completion callback),
checks the append-only contract and callback keys on every call, and records every turn, so an
agent can be tested for training without a cluster. Given a model directory it renders the model's
own chat template, keeps each rollout's ids token-in-token-out and reports template drift. Entry points: ``osmosis rollout run`` and
``osmosis rollout bench``, or :class:`TrainGate` + :func:`osmosis_ai.runs.rollouts.run_rollouts` from Python.
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "AppendOnlyViolation": "osmosis_ai.traingate.append_only",
    "check_append_only": "osmosis_ai.traingate.append_only",
    "TrainGate": "osmosis_ai.traingate.gateway",
    "RolloutSession": "osmosis_ai.traingate.session",
    "TurnRecord": "osmosis_ai.traingate.session",
    "RunSummary": "osmosis_ai.traingate.report",
    "summarize": "osmosis_ai.traingate.report",
    "make_policy": "osmosis_ai.traingate.policy",
    "Policy": "osmosis_ai.traingate.policy.base",
    "Generation": "osmosis_ai.traingate.policy.base",
    "ChatTemplate": "osmosis_ai.traingate.chat_template",
    "ChatTokenizer": "osmosis_ai.traingate.tokenizer",
    "load_tokenizer": "osmosis_ai.traingate.tokenizer",
    "TokenTrace": "osmosis_ai.traingate.tito",
    "DriftEvent": "osmosis_ai.traingate.drift",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
