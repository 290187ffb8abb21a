"""Training a rollout server with an external trainer: the trainer's model answers the agent's chat
calls through the local TrainGate, token-in-token-out, and each rollout becomes one token sample.

:mod:`~osmosis_ai.train.rollouts` is the trainer-independent core (:func:`collect_samples`);
:mod:`~osmosis_ai.train.trl` adapts it to TRL's ``GRPOTrainer`` (extra ``trl``),
:mod:`~osmosis_ai.train.verl` to verl's agent loop (extra ``verl``);
:mod:`~osmosis_ai.train.tiny` builds a tiny local model to run it all on a CPU.
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Collector": "osmosis_ai.train.rollouts",
    "Limits": "osmosis_ai.train.rollouts",
    "Sample": "osmosis_ai.train.rollouts",
    "Target": "osmosis_ai.train.rollouts",
    "collect_samples": "osmosis_ai.train.rollouts",
    "sample_of": "osmosis_ai.train.rollouts",
    "exclude_thin_groups": "osmosis_ai.train.rollouts",
    "build_tiny_model": "osmosis_ai.train.tiny",
    "OsmosisRollouts": "osmosis_ai.train.trl",
    "server_reward": "osmosis_ai.train.trl",
    "prompt_of": "osmosis_ai.train.trl",
    "OsmosisAgentLoop": "osmosis_ai.train.verl",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
