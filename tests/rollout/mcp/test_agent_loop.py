"""``MCPAgentLoop`` run by the local runner, its model calls answered by the OpenAI-compatible stand-in
through LiteLLM and its tools by a real in-process fastmcp server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from osmosis_ai.rollout.mcp import MCPAgentLoop, MCPLoadError, load_mcp_server
from osmosis_ai.runs.engine import Pipeline
from osmosis_ai.runs.executors.local import InProcessExecutor, LocalModel
from osmosis_ai.runs.executors.model_client import ExternalLLMClient
from osmosis_ai.runs.items import PRIMARY, WorkItem
from osmosis_ai.runs.result import Result
from osmosis_ai.runs.scorer import Scorer
from tests.rollout.mcp.conftest import CALCULATOR_MCP, SCHEMAS_MCP
from tests.support.openai_server import OpenAIServer, Reply, completion_body

ROW = {"system_prompt": "Use the tools.", "user_prompt": "Go.", "ground_truth": "x"}


def calls(*requested: tuple[str, Any]) -> Reply:
    """An assistant reply asking for the tool calls ``(name, arguments)``, with ids ``call_0``, ``call_1`` ..."""
    body = completion_body(None)
    body["choices"][0]["message"]["tool_calls"] = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for i, (name, args) in enumerate(requested)
    ]
    body["choices"][0]["finish_reason"] = "tool_calls"
    return Reply(body=body)


@pytest.fixture
async def schemas_agent() -> AsyncIterator[MCPAgentLoop]:
    agent = MCPAgentLoop(load_mcp_server(SCHEMAS_MCP), tool_timeout=30)  # a bound on a hang
    yield agent
    await agent.aclose()


async def _run(agent: MCPAgentLoop, server: OpenAIServer, max_turns: int = 10) -> Result:
    client = ExternalLLMClient("local-model", api_key="sk-test", api_base=server.url)
    async with client:
        executor = InProcessExecutor(agent, {PRIMARY: LocalModel(client)}, max_turns=max_turns)
        return await Pipeline(executor, Scorer())(WorkItem(0, 0, ROW))


def _tool_messages(result: Result) -> list[dict[str, Any]]:
    return [m for m in result.attempt.final_messages if m.get("role") == "tool"]


async def test_the_tools_reach_the_model_with_their_nested_schema(
    schemas_agent: MCPAgentLoop, openai_server: OpenAIServer
) -> None:
    openai_server.queue("done")
    result = await _run(schemas_agent, openai_server)
    assert result.success and result.attempt.final_messages[-1]["content"] == "done"
    sent = {t["function"]["name"]: t["function"] for t in openai_server.requests[0].json["tools"]}
    person = sent["register"]["parameters"]["properties"]["person"]
    assert person["properties"]["addresses"]["items"]["properties"]["city"]["type"] == "string"
    assert sent["register"]["parameters"]["properties"]["tags"]["items"] == {"type": "string"}
    assert sent["explode"]["description"] == "Always fails."


async def test_several_tool_calls_of_one_turn_run_concurrently_and_answer_in_order(
    schemas_agent: MCPAgentLoop, openai_server: OpenAIServer
) -> None:
    # Each rendezvous call waits for a second one: called one after the other, both would say "alone".
    openai_server.queue(calls(("rendezvous", {"party": "a"}), ("rendezvous", {"party": "b"})), "ok")
    result = await _run(schemas_agent, openai_server)
    assert [(m["tool_call_id"], m["content"]) for m in _tool_messages(result)] == [
        ("call_0", "met"),
        ("call_1", "met"),
    ]
    assert result.success and result.attempt.finish_reason == "stop"


async def test_tool_failures_go_back_to_the_model_as_tool_messages(openai_server: OpenAIServer) -> None:
    # 2 s: long enough for the calls that answer at once on a busy machine, short for the one that never does.
    agent = MCPAgentLoop(load_mcp_server(SCHEMAS_MCP), tool_timeout=2)
    openai_server.queue(
        calls(
            ("explode", {"reason": "on purpose"}),
            ("sleepy", {"seconds": 3600}),
            ("register", "{not json"),
            ("no_such_tool", {}),
            ("register", {"person": {"name": "Ada", "addresses": [{"street": "1 Main", "city": "Oslo"}]}, "tags": ["x"]}),
        ),
        "recovered",
    )  # fmt: skip
    try:
        result = await _run(agent, openai_server)
    finally:
        await agent.aclose()
    explode, sleepy, bad_json, unknown, register = (m["content"] for m in _tool_messages(result))
    assert explode.startswith("Error: ") and "exploded: on purpose" in explode
    assert sleepy == "Error: the tool did not finish within 2s"
    assert bad_json.startswith("Error: tool arguments are not valid JSON")
    assert unknown.startswith("Error: ") and "no_such_tool" in unknown
    assert json.loads(register) == {"registered": "Ada", "cities": ["Oslo"], "tags": ["x"]}
    # The model saw every answer, and the row completed: tool failures are the model's to handle.
    assert len([m for m in openai_server.requests[1].json["messages"] if m["role"] == "tool"]) == 5
    assert result.success and result.attempt.final_messages[-1]["content"] == "recovered"


async def test_a_model_that_keeps_calling_tools_ends_at_max_turns(openai_server: OpenAIServer) -> None:
    agent = MCPAgentLoop(load_mcp_server(CALCULATOR_MCP), agent_name="calc")
    try:
        openai_server.handler = lambda payload: calls(("add", {"a": 1, "b": 2}))
        result = await _run(agent, openai_server, max_turns=3)
    finally:
        await agent.aclose()
    assert agent.name == "calc" and result.attempt.finish_reason == "max_turns"
    assert [m["content"] for m in _tool_messages(result)] == ["3", "3", "3"]
    assert result.reward is None  # the agent never scores: that is the reward function's job


def test_a_server_whose_tools_cannot_be_listed_is_refused_when_the_agent_is_built() -> None:
    from tests.support.sockets import free_port

    with pytest.raises(MCPLoadError, match=r"cannot list the tools of MCP server 'http://127\.0\.0\.1"):
        MCPAgentLoop(f"http://127.0.0.1:{free_port()}/mcp")
