"""The calculator agent loop: chat, run the requested calculator tools, repeat; reward the final answer.

Serve it with ``osmosis serve --local -m examples.calculator.agent:agent_loop``.
"""

from __future__ import annotations

import time
from typing import Any

from examples.calculator.reward import calculator_reward
from examples.calculator.tools import TOOLS, run_tool
from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult


def _tool_message(tool_call: Any) -> dict[str, Any]:
    """Run one tool call from an assistant message; malformed calls become error text, not exceptions."""
    call = tool_call if isinstance(tool_call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    name = function.get("name")
    content = (
        run_tool(name, function.get("arguments"))
        if isinstance(name, str)
        else "Error: malformed tool call without a function name"
    )
    return {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": content}


class CalculatorAgentLoop(RolloutAgentLoop):
    """Solves one arithmetic question with the add/subtract/multiply/divide tools."""

    name = "calculator"

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:  # type: ignore[override]
        return TOOLS

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        request = ctx.request
        messages = list(request.messages)
        for _ in range(request.max_turns):
            result = await ctx.chat(messages, **request.completion_params)
            messages.append(result.message)
            tool_calls = result.message.get("tool_calls")
            if not tool_calls:
                reward = None
                ground_truth = request.metadata.get("ground_truth")
                if ground_truth is not None:
                    reward = calculator_reward(result.message.get("content") or "", str(ground_truth))
                return ctx.complete(messages, reward=reward)
            for tool_call in tool_calls:
                started = time.perf_counter()
                messages.append(_tool_message(tool_call))
                function = tool_call.get("function") if isinstance(tool_call, dict) else None
                name = function.get("name") if isinstance(function, dict) else None
                ctx.record_tool_call(
                    (time.perf_counter() - started) * 1000.0, name if isinstance(name, str) else None
                )
        return ctx.complete(messages, finish_reason="max_turns")


agent_loop = CalculatorAgentLoop()
