"""The agent and eval function ``benchmarks/eval_throughput.py`` evaluates: one model call per run,
scored by whether the stub's verdict is at least 0.5 (so the run does real scoring work)."""

from __future__ import annotations

import json
from typing import Any

from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult


class OneCallAgent(RolloutAgentLoop):
    name = "one_call"

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:  # type: ignore[override]
        return []

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        messages = list(ctx.request.messages)
        result = await ctx.chat(messages)
        return ctx.complete([*messages, result.message])


def verdict_passes(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
    """1.0 when the stub's score is at least 0.5."""
    return float(json.loads(solution_str)["score"] >= 0.5)


agent_loop = OneCallAgent()
