"""Agent loops that end in a chosen way, for outcome tests.

``OutcomeAgent`` reads the dataset column ``mode`` (in the request metadata): ``"fail"`` raises,
``"exit"`` calls ``sys.exit(3)``, ``"interrupt"`` raises ``KeyboardInterrupt``, ``"skip"`` completes
without calling the model, anything else calls the model once and completes.
"""

from __future__ import annotations

import sys
from typing import Any

from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult


class OutcomeAgent(RolloutAgentLoop):
    name = "outcome"

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:  # type: ignore[override]
        return []

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        messages = list(ctx.request.messages)
        mode = ctx.request.metadata.get("mode")
        if mode == "fail":
            raise RuntimeError("the agent broke on purpose")
        if mode == "exit":
            sys.exit(3)
        if mode == "interrupt":
            raise KeyboardInterrupt
        if mode != "skip":
            result = await ctx.chat(messages)
            messages.append(result.message)
        return ctx.complete(messages, reward=1.0)


agent_loop = OutcomeAgent()
