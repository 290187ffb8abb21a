"""The workflow and grader of ``test_agents_openai.py``, apart so that its modules (the SDK, and
LiteLLM under it) are imported when its tests run, not by every xdist worker as it collects."""

from __future__ import annotations

from typing import Any

from agents import Runner, function_tool

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.integrations.agents.openai_agents import (
    OsmosisAgent,
    OsmosisLitellmModel,
    OsmosisMemorySession,
    OsmosisRolloutModel,
)

__all__ = ["AddingWorkflow", "AnswerGrader", "OsmosisAgent", "OsmosisLitellmModel", "OsmosisMemorySession",
           "OsmosisRolloutModel", "Runner"]  # fmt: skip


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AddingWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> None:
        session = OsmosisMemorySession()
        agent = OsmosisAgent(name="adder", tools=[add], model=OsmosisRolloutModel())
        await Runner.run(agent, ctx.prompt, session=session)


def final_answer(items: Any) -> str:
    """The text of the last assistant message among the session's (Responses-API) items."""
    message = [item for item in items if item.get("role") == "assistant"][-1]
    return "".join(part["text"] for part in message["content"] if part.get("type") == "output_text")


class AnswerGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if final_answer(ctx.sample.messages).strip() == ctx.label else 0.0)
