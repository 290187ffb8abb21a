"""The workflow and grader of ``test_agents_strands.py``, apart so that its modules (Strands Agents, and
LiteLLM under it) are imported when its tests run, not by every xdist worker as it collects."""

from __future__ import annotations

from typing import Any

from strands import tool

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.integrations.agents.strands import OsmosisRolloutModel, OsmosisStrandsAgent

__all__ = ["AddingWorkflow", "AnswerGrader", "OsmosisRolloutModel", "OsmosisStrandsAgent"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


class AddingWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> None:
        system, *conversation = ctx.prompt
        agent = OsmosisStrandsAgent(
            model=OsmosisRolloutModel(),
            tools=[add],
            system_prompt=system["content"],
            messages=conversation,
            callback_handler=None,
        )
        await agent.invoke_async()


def final_answer(messages: Any) -> str:
    """The text of the last assistant message among Strands' messages."""
    message = [m for m in messages if m["role"] == "assistant"][-1]
    return "".join(block.get("text", "") for block in message["content"])


class AnswerGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if final_answer(ctx.sample.messages).strip() == ctx.label else 0.0)
