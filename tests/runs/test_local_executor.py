"""The in-process executor: each item's typed outcome, against the local OpenAI-compatible stand-in."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from osmosis_ai._http import RetryPolicy
from osmosis_ai.errors import ToolValidationError
from osmosis_ai.models.errors import ProviderError
from osmosis_ai.outcome import Outcome
from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult
from osmosis_ai.runs.engine import Pipeline, run_items
from osmosis_ai.runs.executors.local import InProcessExecutor, LocalModel, validate_tools
from osmosis_ai.runs.executors.model_client import ExternalLLMClient
from osmosis_ai.runs.items import PRIMARY, WorkItem, work_items
from osmosis_ai.runs.result import Result
from osmosis_ai.runs.scorer import Scorer
from tests.support.openai_server import OpenAIServer, Reply

ROW = {"system_prompt": "s", "user_prompt": "u", "ground_truth": "g"}


def _tool(name: Any, parameters: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def test_tool_validation() -> None:
    assert validate_tools([_tool("web-search", {"type": "object"})])  # '-' is valid for providers
    for bad in ([_tool("has space")], [_tool("")], [{"type": "function"}], [_tool("x", {"type": "array"})]):
        with pytest.raises(ToolValidationError):
            validate_tools(bad)


class CatchingAgent(RolloutAgentLoop):
    """Catches the model's failure and reports an error itself; or sleeps when asked to."""

    name = "catching"

    def __init__(self, tools: list[Any] | None = None, sleep: float = 0.0) -> None:
        self.tools = tools or []
        self.sleep = sleep

    async def get_tools(self, request: RolloutRequest) -> list[Any]:  # type: ignore[override]
        return self.tools

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        await asyncio.sleep(self.sleep)
        try:
            await ctx.chat(list(ctx.request.messages))
        except ProviderError as exc:
            return ctx.error(str(exc))
        return ctx.complete(list(ctx.request.messages), reward=0.0)


async def test_outcomes(openai_server: OpenAIServer) -> None:
    client = ExternalLLMClient(
        "m", api_key="k", api_base=openai_server.url, retry=RetryPolicy(max_attempts=1)
    )
    openai_server.queue(Reply(status=400), "fine")
    results: list[Result] = []
    await run_items(
        work_items([(0, ROW), (1, ROW)]),
        _pipeline(CatchingAgent(), client),
        concurrency=1,
        on_result=results.append,
    )
    assert [r.outcome for r in results] == [Outcome.MODEL_ERROR, Outcome.COMPLETED]
    assert "HTTP 400" in (results[0].error or "")
    assert results[1].reward == 0.0  # a genuine 0 from a completed row is a score
    bad_tools = await _pipeline(CatchingAgent(tools=[_tool("no spaces allowed")]), client)(
        WorkItem(0, 0, ROW)
    )
    assert bad_tools.outcome is Outcome.AGENT_ERROR
    assert (bad_tools.error or "").startswith("tool validation error")
    slow = await _pipeline(CatchingAgent(sleep=5), client, timeout=0.05)(WorkItem(3, 0, ROW))
    assert slow.outcome is Outcome.TIMEOUT and "0.05s" in (slow.error or "")


def _pipeline(agent: Any, client: Any, *, timeout: float | None = None) -> Pipeline:
    return Pipeline(InProcessExecutor(agent, {PRIMARY: LocalModel(client)}), Scorer(), timeout=timeout)
