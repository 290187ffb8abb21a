"""Scoring a plan's items: the scorer the plan's :class:`~osmosis_ai.runs.plan.Scoring` names, around
an executor, as the :class:`~osmosis_ai.runs.engine.Pipeline` a run hands the engine — built the same
way in the run's process and on each Ray worker.

Scoring functions run in the reward runtime (worker processes that end with the pipeline's context,
however it ends), a rubric's judge in the pipeline's own process
(:func:`osmosis_ai.runs.judging.judge_function`); the item's reward is the score the plan names, or
the agent's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from osmosis_ai.runs.plan import RunPlan, Scoring

if TYPE_CHECKING:
    from osmosis_ai.models.concurrency import CallObserver
    from osmosis_ai.rewards.eval_fn import EvalFnWrapper
    from osmosis_ai.rewards.runtime import RewardRuntime
    from osmosis_ai.runs.engine import Executor, Pipeline


def load_scorers(scoring: Scoring) -> list[EvalFnWrapper]:
    """The scoring functions, imported and their signatures checked (before any worker starts)."""
    from osmosis_ai.rewards.eval_fn import EvalFnWrapper
    from osmosis_ai.rollout.loading import load_attribute

    example = "e.g. 'my_evals:exact'"
    return [
        EvalFnWrapper(load_attribute(spec, what=scoring.kind, example=example), spec)
        for spec in scoring.functions
    ]


def runtimes(scoring: Scoring, item_timeout: float | None = None) -> list[RewardRuntime]:
    """The reward runtime of each scoring function (not started). Its limit per sample is at most
    ``item_timeout`` (the plan's per item): a score cannot be used past the item's deadline, so a
    function still running then frees its worker for the items behind it."""
    from osmosis_ai.rewards.runtime import RewardRuntime, RewardRuntimeError

    limits = [limit for limit in (scoring.timeout or None, item_timeout or None) if limit is not None]
    made = []
    for spec in scoring.functions:
        try:
            made.append(
                RewardRuntime(
                    spec,
                    timeout=min(limits, default=None),
                    workers=scoring.workers,
                    memory_limit_mb=scoring.memory_limit_mb,
                    kind=scoring.kind,
                )
            )
        except RewardRuntimeError as exc:  # its own class, the function named in its message
            exc.args = (f"{scoring.kind} {spec!r}: {exc}",)
            raise
    return made


def described(scoring: Scoring, item_timeout: float | None = None) -> list[str]:
    """How each scoring function runs, a line each."""
    lines = [runtime.describe() for runtime in runtimes(scoring, item_timeout)]
    if scoring.judge is not None:
        lines.append(f"the judge of rubric {scoring.judge.config.rubric_id!r}")
    return lines


@contextlib.asynccontextmanager
async def scored(
    plan: RunPlan, executor: Executor, observer: CallObserver | None = None
) -> AsyncIterator[Pipeline]:
    """``executor`` then the plan's scoring, within the plan's time limit per item; ``observer`` (an
    ``auto`` concurrency limit) hears how each judge request ended."""
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.judging import judge_function
    from osmosis_ai.runs.scorer import Scorer, agent_function, runtime_function

    scoring = plan.scoring
    made = runtimes(scoring, plan.timeout)
    functions = [runtime_function(rt, name) for rt, name in zip(made, scoring.score_names, strict=True)]
    if scoring.judge is not None:
        functions.append(judge_function(scoring.judge, observer=observer))
    if scoring.agent_score is not None:
        functions.append(agent_function(scoring.agent_score))
    scorer = Scorer(functions, reward=scoring.reward)
    async with contextlib.AsyncExitStack() as stack:
        for runtime in made:
            await stack.enter_async_context(runtime)
        yield Pipeline(executor, scorer, timeout=plan.timeout)


@contextlib.asynccontextmanager
async def on_worker(settings: dict[str, Any], share: int) -> AsyncIterator[Pipeline]:
    """One Ray worker's pipeline, built on the worker from ``settings["plan"]`` alone, for the model
    tags ``settings["tags"]``, ``share`` items in flight."""
    plan: RunPlan = settings["plan"]
    prepared = plan.executor.prepare(plan)
    async with prepared.session(plan, settings["tags"], None) as session, session.pipeline(share) as pipeline:
        yield pipeline
