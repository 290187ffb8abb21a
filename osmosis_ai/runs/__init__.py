"""The run engine: the loop under ``osmosis test``, ``osmosis eval`` and ``osmosis rollout run``.

Data flows one way (:mod:`osmosis_ai.runs.engine`): work items — dataset rows × samples (× the
models under comparison) — are taken lazily from the dataset reader (:mod:`~osmosis_ai.runs.items`);
an **executor** runs each (:mod:`~osmosis_ai.runs.executors`: the agent in-process, or an agent
behind a rollout server driven by the local TrainGate) into an :class:`~osmosis_ai.runs.result.Attempt`;
the one **scorer** (:mod:`~osmosis_ai.runs.scorer`) turns it into a scored
:class:`~osmosis_ai.runs.result.Result` by the score rule; the result is committed to the
run's journal before it counts, and only then handed to the application's ``on_result`` callback.
Every item ends in a typed :class:`~osmosis_ai.outcome.Outcome`. On Ray, the ``process``
is a :func:`~osmosis_ai.runs.backends.ray.ray_pool` whose workers build the pipeline from a
:class:`~osmosis_ai.runs.backends.ray.WorkerSpec` (``osmosis_ai[ray]``).
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Attempt": "osmosis_ai.runs.result",
    "Result": "osmosis_ai.runs.result",
    "WorkItem": "osmosis_ai.runs.items",
    "work_items": "osmosis_ai.runs.items",
    "Scorer": "osmosis_ai.runs.scorer",
    "ScoreFn": "osmosis_ai.runs.scorer",
    "Pipeline": "osmosis_ai.runs.engine",
    "RunReport": "osmosis_ai.runs.engine",
    "run_items": "osmosis_ai.runs.engine",
    "RunPlan": "osmosis_ai.runs.plan",
    "run": "osmosis_ai.runs.run",
    "RunConfig": "osmosis_ai.runs.rollouts",
    "run_rollouts": "osmosis_ai.runs.rollouts",
    "run_bench": "osmosis_ai.runs.bench",
    "WorkerSpec": "osmosis_ai.runs.backends.ray",
    "ray_pool": "osmosis_ai.runs.backends.ray",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
