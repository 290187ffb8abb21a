"""The calculator agent with its model reached through ``ctx.base_url`` by the real ``openai`` client.

``agent_loop`` asks for whole replies, ``streaming_agent_loop`` for server-sent-event streams (the
message rebuilt from the chunks); both append the message the way a user of that client would, so a
run of them can be compared with the calculator's own ``ctx.chat`` run.
"""

from __future__ import annotations

from typing import Any

import openai

from examples.calculator.agent import CalculatorAgentLoop, _tool_message
from osmosis_ai.rollout import RolloutContext, RolloutResult


async def _streamed(client: openai.AsyncOpenAI, **params: Any) -> dict[str, Any]:
    """One streamed reply put back together: content, tool calls by index."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    stream = await client.chat.completions.create(stream=True, **params)
    async for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content is not None:
                content.append(delta.content)
            for call in delta.tool_calls or []:
                entry = calls.setdefault(
                    call.index, {"id": call.id, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if call.function is not None:
                    entry["function"]["name"] += call.function.name or ""
                    entry["function"]["arguments"] += call.function.arguments or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) if content else None}
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return message


class OpenAICalculator(CalculatorAgentLoop):
    def __init__(self, *, stream: bool) -> None:
        self.stream = stream

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        # Closed with the rollout: a client left to the garbage collector closes its connections
        # after the run's event loop is gone, and asyncio then prints their errors.
        async with openai.AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key) as client:
            return await self._run(ctx, client)

    async def _run(self, ctx: RolloutContext, client: openai.AsyncOpenAI) -> RolloutResult:
        request = ctx.request
        messages = list(request.messages)
        params = {"model": "policy", **request.completion_params}
        for _ in range(request.max_turns):
            if self.stream:
                message = await _streamed(client, messages=messages, **params)
            else:
                reply = await client.chat.completions.create(messages=messages, **params)
                message = reply.choices[0].message.model_dump(exclude_unset=True)
            messages.append(message)
            tool_calls = message.get("tool_calls")
            if not tool_calls:
                return ctx.complete(messages, reward=1.0)
            for tool_call in tool_calls:
                messages.append(_tool_message(tool_call))
                ctx.record_tool_call(0.0, tool_call["function"]["name"])
        return ctx.complete(messages, finish_reason="max_turns")


agent_loop = OpenAICalculator(stream=False)
streaming_agent_loop = OpenAICalculator(stream=True)
