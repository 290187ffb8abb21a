"""A workflow and graders for the grader-worker tests, in a module of their own so that a worker
process imports them by name (``tests.rollout.v03.graders:Misbehaving``) without the tests' imports."""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path
from typing import Any

from osmosis_ai.errors import InfrastructureError
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.types import AgentWorkflowConfig


class Answers(AgentWorkflow[AgentWorkflowConfig]):
    """Answers "4"."""

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> Any:
        return [*ctx.prompt, {"role": "assistant", "content": "4"}]


class Misbehaving(Grader):
    """Rewards an answer equal to the label with 1.0 and notes its process id in the sample's metrics,
    or as the metadata's ``grader`` says: ``sleep`` (blocks the process, after writing its pid to the
    metadata's ``pid_file``), ``exit`` (``sys.exit(3)``), ``os_exit`` (``os._exit(7)``), ``segfault``,
    ``none`` (sets no reward), ``raise``, ``infra`` (raises InfrastructureError), ``unpicklable`` (leaves a lambda on the sample)."""

    async def grade(self, ctx: GraderContext) -> None:
        meta = ctx.metadata or {}
        how = meta.get("grader", "")
        if how == "sleep":
            Path(meta["pid_file"]).write_text(str(os.getpid()))
            time.sleep(600)
        if how == "exit":
            sys.exit(3)
        if how == "os_exit":
            os._exit(7)
        if how == "segfault":
            ctypes.string_at(0)
        if how == "raise":
            raise ValueError("the grader did not like the answer")
        if how == "infra":
            raise InfrastructureError("the sandbox could not run the code: bwrap is missing")
        if how == "none":
            return
        assert ctx.sample is not None
        if how == "unpicklable":
            ctx.sample.extra_fields["handle"] = lambda: None
        ctx.sample.metrics["graded_in"] = os.getpid()
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
