"""Tools of a running MCP server, reached over streamable HTTP on loopback through fastmcp's client."""

from __future__ import annotations

import asyncio

import pytest

from osmosis_ai.rollout.mcp import MCPAgentLoop
from osmosis_ai.rollout.mcp.session import ToolSession, tool_result_text


def test_an_agent_over_a_running_server_offers_its_tools_with_their_schemas(mcp_url: str) -> None:
    agent = MCPAgentLoop(mcp_url)
    tools = {t["function"]["name"]: t["function"] for t in agent.get_tools(None)}  # type: ignore[arg-type]
    assert set(tools) == {"register", "explode", "rendezvous", "sleepy"}
    assert (
        tools["register"]["parameters"]["properties"]["person"]["properties"]["addresses"]["type"] == "array"
    )


async def test_calls_over_http_run_concurrently_and_a_timeout_does_not_break_the_connection(
    mcp_url: str,
) -> None:
    session = ToolSession(mcp_url)
    try:
        met = await asyncio.gather(
            session.call_tool("rendezvous", {"party": "a"}, 5),
            session.call_tool("rendezvous", {"party": "b"}, 5),
        )
        failed = await session.call_tool("explode", {"reason": "remote"}, 5)
        with pytest.raises(asyncio.TimeoutError):
            await session.call_tool("sleepy", {"seconds": 30}, 0.2)
        after_timeout = await session.call_tool("sleepy", {"seconds": 0}, 5)
    finally:
        await session.aclose()
    assert met == [("met", False), ("met", False)]
    assert failed[1] and "exploded: remote" in failed[0]
    assert after_timeout == ("awake", False)


class _Result:
    """A CallToolResult as the MCP wire shape has it (what ``model_dump(by_alias=True)`` gives)."""

    def __init__(self, **wire: object) -> None:
        self.wire = wire

    def model_dump(self, **_: object) -> dict[str, object]:
        return self.wire


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({"structuredContent": {"result": 7}, "content": [{"type": "text", "text": "7"}]}, ("7", False)),
        ({"structuredContent": {"result": True}}, ("true", False)),
        ({"structuredContent": {"a": [1, 2]}}, ('{"a": [1, 2]}', False)),
        ({"content": [{"type": "text", "text": "one"}, {"type": "image", "data": "..."}, {"type": "text", "text": "two"}]}, ("one\ntwo", False)),
        ({"content": [{"type": "text", "text": "bad input"}], "isError": True}, ("bad input", True)),
        ({"content": []}, ("", False)),
    ],
)  # fmt: skip
def test_a_tool_result_becomes_the_text_the_model_reads(
    wire: dict[str, object], expected: tuple[str, bool]
) -> None:
    assert tool_result_text(_Result(**wire)) == expected
