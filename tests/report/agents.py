"""An agent for the report tests whose rollouts end in chosen ways, served by ``osmosis rollout run -m``.

Each dataset row's ``mode`` says what happens: ``"rewrite"`` edits the user message between the two
model calls (an append-only violation at message 1), ``"fail"`` raises before calling the model, and
anything else is the well-behaved calculator loop. The agent's reward is the row's ``reward`` column.
"""

from __future__ import annotations

from typing import Any

from examples.calculator.tools import TOOLS
from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult


class ReportAgent(RolloutAgentLoop):
    name = "report_agent"

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:  # type: ignore[override]
        return TOOLS

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        mode = ctx.request.metadata.get("mode")
        if mode == "fail":
            raise RuntimeError("the agent broke on purpose")
        messages = list(ctx.request.messages)
        first = await ctx.chat(messages)
        messages.append(first.message)
        for call in first.message.get("tool_calls") or []:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "19"})
        if mode == "rewrite":
            messages[1] = {**messages[1], "content": messages[1]["content"] + " Think step by step."}
        final = await ctx.chat(messages)
        return ctx.complete([*messages, final.message], reward=float(ctx.request.metadata.get("reward", 1.0)))


agent_loop = ReportAgent()
