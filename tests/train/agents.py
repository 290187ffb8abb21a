"""Agents for the training tests, each taking two model turns with an environment message between, so
every trajectory holds tokens the model did not generate.

The 0.2 agent answers each tool call the model made with a tool message and otherwise appends a user
message; its reward is the row's ``reward`` column, and a row whose ``fail`` column is true raises
after the first turn (one whose ``hang`` column is true never finishes, one whose ``rewrite`` column
is true edits the user's message before the second turn). The 0.3 workflow does the same over an OpenAI-compatible chat endpoint, and its
grader gives the row's label as the reward.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]
NUDGE = "The calculator says 19. Give the final answer."


def environment(message: dict[str, Any]) -> list[dict[str, Any]]:
    """What the environment appends after the model's first turn."""
    calls = message.get("tool_calls") or []
    if calls:
        return [{"role": "tool", "tool_call_id": call["id"], "content": "19"} for call in calls]
    return [{"role": "user", "content": NUDGE}]


class TwoTurnAgent(RolloutAgentLoop):
    """``seen[row_index]`` keeps each rollout's generated ids per turn, as the gateway answered them.
    The reward is the row's ``reward`` column, plus ``spread`` for an odd ``row_index``. A row fails when its ``fail`` column is true, or equals its ``row_index`` modulo ``fail_every``."""

    name = "two_turns"

    def __init__(self, fail_every: int = 0, spread: float = 0.0) -> None:
        self.fail_every, self.spread = fail_every, spread
        self.seen: dict[int, list[list[int]]] = {}

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:  # type: ignore[override]
        return TOOLS

    def failing(self, metadata: dict[str, Any]) -> bool:
        fail = metadata.get("fail")
        if self.fail_every and isinstance(fail, int) and not isinstance(fail, bool):
            return metadata["row_index"] % self.fail_every == fail
        return fail is True

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        messages = list(ctx.request.messages)
        first = await ctx.chat(messages)
        messages += [first.message, *environment(first.message)]
        if self.failing(ctx.request.metadata):
            raise RuntimeError("the agent broke on purpose")
        if ctx.request.metadata.get("rewrite"):  # edits what the model saw: an append-only violation
            user = next(i for i, message in enumerate(messages) if message["role"] == "user")
            messages[user] = {**messages[user], "content": "What is 5 + 15?"}
        if ctx.request.metadata.get("hang"):
            await asyncio.Event().wait()  # past the rollout's time limit: the run's timeout ends it
        final = await ctx.chat(messages)
        self.seen[ctx.request.metadata["row_index"]] = [first.token_ids, final.token_ids]
        reward = float(ctx.request.metadata["reward"]) + self.spread * (ctx.request.metadata["row_index"] % 2)
        return ctx.complete([*messages, final.message], reward=reward)


class TwoTurnWorkflow(AgentWorkflow):  # type: ignore[type-arg]
    async def run(self, ctx: AgentWorkflowContext) -> list[dict[str, Any]]:  # type: ignore[type-arg]
        rollout = get_rollout_context()
        assert rollout is not None
        headers = {"Authorization": f"Bearer {rollout.api_key}"}
        messages = list(ctx.prompt)
        async with httpx.AsyncClient(timeout=60) as client:
            for turn in range(2):
                response = await client.post(
                    f"{rollout.chat_completions_url}/chat/completions",
                    json={"model": "policy", "messages": messages, "tools": TOOLS},
                    headers=headers,
                )
                response.raise_for_status()
                message = response.json()["choices"][0]["message"]
                message = {key: value for key, value in message.items() if value is not None}
                messages.append(message)
                if turn == 0:
                    messages += environment(message)
        return messages


class LabelGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(float(ctx.label or 0.0))
