"""Building a plan's :class:`~osmosis_ai.runs.engine.Pipeline`: in the run's process, or on each Ray
worker from the same :class:`~osmosis_ai.runs.plan.RunPlan` (:func:`on_worker`, the factory the Ray
backend names), so a worker depends on the plan alone, never on the command that made it.

The pipeline is the agent in-process with its model clients, scored by the plan's eval functions in
the reward runtime (whose worker processes end with the pipeline's context, however it ends), or by
the agent's own reward.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from osmosis_ai.errors import OsmosisError
from osmosis_ai.evaluation.journal import PRIMARY
from osmosis_ai.runs.plan import RunPlan, Scoring

if TYPE_CHECKING:
    from osmosis_ai.evaluation.llm_client import ExternalLLMClient
    from osmosis_ai.models.concurrency import CallObserver
    from osmosis_ai.rewards.runtime import RewardRuntime
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.local import LocalModel


class ScoringSetupError(OsmosisError):
    """An eval function's runtime settings are refused (a bad worker count, memory limit, ...)."""


def model_clients(
    plan: RunPlan, tags: list[str] | None = None, observer: CallObserver | None = None
) -> dict[str, ExternalLLMClient]:
    """A model client for each of ``tags`` (default: every model of the plan)."""
    from osmosis_ai.evaluation.llm_client import ExternalLLMClient

    executor = plan.executor
    return {
        tag: ExternalLLMClient(model.name, api_key=model.api_key, api_base=model.base_url, observer=observer)
        for tag, model in executor.models
        if tags is None or tag in tags
    }


def runtimes(scoring: Scoring) -> list[RewardRuntime]:
    """The reward runtime of each eval function (not started)."""
    from osmosis_ai.rewards.runtime import RewardRuntime, RewardRuntimeError

    started = []
    for spec in scoring.functions:
        try:
            started.append(
                RewardRuntime(
                    spec,
                    timeout=scoring.timeout or None,
                    workers=scoring.workers,
                    memory_limit_mb=scoring.memory_limit_mb,
                    kind=scoring.kind,
                )
            )
        except RewardRuntimeError as exc:
            raise ScoringSetupError(f"{scoring.kind} {spec!r}: {exc}") from None
    return started


def local_models(plan: RunPlan, clients: Mapping[str, Any]) -> dict[str, LocalModel]:
    """Each client labelled as the plan's command labels its requests (``test``, ``eval``, ``eval-baseline``)."""
    from osmosis_ai.runs.executors.local import LocalModel

    label = plan.executor.label
    models = {}
    for tag, client in clients.items():
        metadata: dict[str, Any] = {"execution_mode": label}
        if label == "test":
            metadata["test_mode"] = True
        if tag != PRIMARY:
            metadata["model_tag"] = tag
        models[tag] = LocalModel(client, label if tag == PRIMARY else f"{label}-{tag}", metadata)
    return models


@contextlib.asynccontextmanager
async def pipeline(
    plan: RunPlan, agent_loop: RolloutAgentLoop, clients: Mapping[str, Any], in_flight: int
) -> AsyncIterator[Pipeline]:
    """The plan's pipeline over ``agent_loop`` and ``clients``; synchronous agent code gets a thread
    per item in flight (``in_flight``), its own."""
    from osmosis_ai._usercode import UserThreads
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.local import InProcessExecutor
    from osmosis_ai.runs.scorer import Scorer, runtime_function

    executor = plan.executor
    threads = UserThreads(in_flight, name=f"osmosis-{executor.label}")
    run_agent = InProcessExecutor(
        agent_loop,
        local_models(plan, clients),
        max_turns=executor.max_turns,
        completion_params=dict(executor.completion_params),
        debug_dir=executor.debug_dir,
        threads=threads,
    )
    scoring = runtimes(plan.scoring)
    scorer = Scorer(
        [runtime_function(rt, spec) for rt, spec in zip(scoring, plan.scoring.functions, strict=True)]
    )
    async with contextlib.AsyncExitStack() as stack:
        for runtime in scoring:
            await stack.enter_async_context(runtime)
        yield Pipeline(run_agent, scorer, timeout=plan.timeout)


@contextlib.asynccontextmanager
async def on_worker(settings: Mapping[str, Any], share: int) -> AsyncIterator[Pipeline]:
    """One Ray worker's pipeline: the plan's agent, models and scorers, built on the worker from
    ``settings["plan"]``, ``share`` items in flight."""
    plan: RunPlan = settings["plan"]
    tags: list[str] = settings["tags"]
    async with contextlib.AsyncExitStack() as stack:
        clients = model_clients(plan, tags)
        for client in clients.values():
            await stack.enter_async_context(client)
        yield await stack.enter_async_context(pipeline(plan, plan.executor.agent.load(), clients, share))
