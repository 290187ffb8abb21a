"""``LocalBackend``: a 0.3 workflow and grader run in this process.

It owns what the user's code sees — a fresh workflow per rollout with a private copy of its config,
the sample taken from ``run``'s return value or else from the registered sample source, a fresh
grader per graded rollout — and raises what that code raises. Deadlines, concurrency slots, typed
failures and the rollout's status belong to the server that runs it (``create_rollout_server``).
"""

from __future__ import annotations

import copy
from typing import Any

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.types.config import AgentWorkflowConfig, GraderConfig
from osmosis_ai.rollout.types.output import as_output
from osmosis_ai.rollout.types.sample import ExecutionRequest, RolloutSample

DEFAULT_MAX_CONCURRENT = 4  # 0.3's, for a workflow given without a config


def _resolved(ref: Any, what: str) -> Any:
    """``ref``, or the object a ``'module.path:attribute'`` string names."""
    if not isinstance(ref, str):
        return ref
    from osmosis_ai.rollout.loading import load_attribute

    return load_attribute(ref, what=what, example="e.g. 'my_rollout.workflow:MyWorkflow'")


def _subclass(value: Any, base: type, what: str) -> Any:
    if not (isinstance(value, type) and issubclass(value, base)):
        raise TypeError(f"LocalBackend({what}=...) must be a {base.__name__} subclass, got {value!r}")
    return value


class LocalBackend:
    """Runs ``workflow`` (an ``AgentWorkflow`` subclass, or ``'module:Class'``) and ``grader`` (a
    ``Grader`` subclass, optional) with their configs (objects or ``'module:name'`` strings).

    ``max_concurrent`` is ``workflow_config.concurrency.max_concurrent``, or 4 without a config;
    ``None`` (a config that sets none) leaves the limit to the server's ``max_concurrent_rollouts``.

    ``grader_workers`` (this package's, not 0.3's): with ``N >= 1`` the server grades in ``N`` warm
    worker processes of the reward runtime, where a grader that hangs, crashes or exits is stopped
    at its deadline and fails its rollout alone (:mod:`.grading`). The grader must then be
    importable by name (a module's class, not one defined in ``__main__`` or in a function);
    one that is not, or the default ``0``, grades in the server's process.
    """

    def __init__(
        self,
        *,
        workflow: type[AgentWorkflow[Any]] | str,
        workflow_config: AgentWorkflowConfig | str | None = None,
        grader: type[Grader] | str | None = None,
        grader_config: GraderConfig | str | None = None,
        grader_workers: int = 0,
    ) -> None:
        if isinstance(grader_workers, bool) or not isinstance(grader_workers, int) or grader_workers < 0:
            raise ValueError(
                f"LocalBackend(grader_workers=...) must be a whole number >= 0, got {grader_workers!r}"
            )
        self.grader_workers = grader_workers
        self.workflow_cls: type[AgentWorkflow[Any]] = _subclass(
            _resolved(workflow, "workflow"), AgentWorkflow, "workflow"
        )
        self.named: type = self.workflow_cls  # the class a server of this backend is named after
        self.workflow_config: AgentWorkflowConfig | None = (
            _resolved(workflow_config, "workflow config") if workflow_config else None
        )
        self.grader_cls: type[Grader] | None = (
            _subclass(_resolved(grader, "grader"), Grader, "grader") if grader else None
        )
        self.grader_config: GraderConfig | None = (
            _resolved(grader_config, "grader config") if grader_config else None
        )
        self.max_concurrent: int | None = (
            self.workflow_config.concurrency.max_concurrent
            if self.workflow_config is not None
            else DEFAULT_MAX_CONCURRENT
        )

    async def run_workflow(self, request: ExecutionRequest) -> RolloutSample | None:
        """Run a fresh workflow on ``request``; its sample, or ``None`` when it produced none."""
        config = copy.deepcopy(self.workflow_config)
        ctx: AgentWorkflowContext[Any] = AgentWorkflowContext(
            prompt=request.prompt, config=config, metadata=request.metadata
        )
        output = as_output(await self.workflow_cls(config).run(ctx))
        if output is None:
            rollout = get_rollout_context()
            return None if rollout is None else await rollout.get_sample()
        if output.messages is None:
            return None
        return RolloutSample(messages=output.messages, label=request.label, metrics=dict(output.metrics))

    def cannot_grade(self, request: ExecutionRequest) -> str | None:
        """Why a rollout that asked to be graded cannot be (no grader, nothing to grade against)."""
        if self.grader_cls is None:
            return "grading was requested but the LocalBackend has no grader"
        if request.label is None and request.metadata is None:
            return "grading was requested but the rollout has neither a label nor metadata to grade against"
        return None

    async def grade(self, request: ExecutionRequest, sample: RolloutSample | None) -> RolloutSample:
        """Grade ``sample`` with a fresh grader; the graded sample (``ValueError`` when it has no reward)."""
        if self.grader_cls is None:
            raise ValueError("the LocalBackend has no grader")
        return await grade_sample(
            self.grader_cls, self.grader_config, request.label, request.metadata, sample
        )


async def grade_sample(
    grader_cls: type[Grader],
    config: GraderConfig | None,
    label: str | None,
    metadata: dict[str, Any] | None,
    sample: RolloutSample | None,
) -> RolloutSample:
    """Grade ``sample`` with a fresh ``grader_cls(config)``: in the server's process or in a grader
    worker (:mod:`.grading`); ``ValueError`` when it leaves the sample without a reward."""
    ctx = GraderContext(label=label, sample=sample, metadata=metadata)
    await grader_cls(config).grade(ctx)
    graded = ctx.sample
    if graded is None:
        raise ValueError(
            "there is no sample to grade: the workflow returned no messages and registered no sample source"
        )
    if graded.reward is None and not graded.remove_sample:
        raise ValueError("the grader set no reward: call ctx.set_reward(value) in Grader.grade")
    return graded
