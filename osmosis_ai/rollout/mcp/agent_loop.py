"""``MCPAgentLoop``: an agent made of nothing but an MCP server's tools.

Each turn asks the model with the whole conversation; the tool calls of its answer run concurrently
through :class:`~osmosis_ai.rollout.mcp.session.ToolSession`, each bounded by ``tool_timeout``, and
their results (a failure included, as ``Error: ...``) go back as tool messages, in the order the model
asked for them. The loop ends when the model answers without tool calls or after ``max_turns`` turns.
It never sets a reward: that is the trainer's or the eval functions' job.

The tools are listed once, when the loop is built (so ``get_tools`` is a cheap synchronous copy and an
unreachable server fails at start-up, not in the first rollout).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from typing import Any

from osmosis_ai._sync import run_sync
from osmosis_ai.rollout.core.base import RolloutAgentLoop, RolloutContext, RolloutResult
from osmosis_ai.rollout.core.exceptions import ToolArgumentError
from osmosis_ai.rollout.core.schemas import MessageDict, RolloutRequest
from osmosis_ai.rollout.mcp.errors import MCPLoadError
from osmosis_ai.rollout.mcp.schema import tool_from_mcp
from osmosis_ai.rollout.mcp.session import ToolSession
from osmosis_ai.rollout.tools import (
    create_tool_error_result,
    create_tool_result,
    execute_tool_calls,
    get_tool_call_info,
)

logger = logging.getLogger(__name__)

DEFAULT_TOOL_TIMEOUT = 60.0


class MCPAgentLoop(RolloutAgentLoop):
    """Serve, test or evaluate the tools of an MCP server as an agent.

    ``mcp_server`` is a ``fastmcp.FastMCP`` object (see :func:`~osmosis_ai.rollout.mcp.load_mcp_server`)
    or the URL of a running MCP server (streamable HTTP, e.g. ``http://127.0.0.1:8000/mcp``).
    ``tool_timeout`` bounds each tool call in seconds (``None``: unbounded).
    """

    name = "mcp_agent"

    def __init__(
        self,
        mcp_server: Any,
        agent_name: str = "mcp_agent",
        *,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
    ) -> None:
        self.name = agent_name
        self.mcp_server = mcp_server
        self.tool_timeout = tool_timeout
        self._session = ToolSession(mcp_server)
        self._tools = self._list_tools()

    def _list_tools(self) -> list[dict[str, Any]]:
        listing = ToolSession(self.mcp_server)  # its own loop, closed with it

        async def listed() -> list[dict[str, Any]]:
            try:
                return await listing.list_tools()
            finally:
                await listing.aclose()

        try:
            tools = run_sync(listed())
        except MCPLoadError:
            raise
        except Exception as exc:
            raise MCPLoadError(
                f"cannot list the tools of MCP server {self._describe()}: {type(exc).__name__}: {exc}"
            ) from exc
        return [tool_from_mcp(t["name"], t.get("description"), t.get("inputSchema")) for t in tools]

    def _describe(self) -> str:
        server = self.mcp_server
        return repr(server) if isinstance(server, str) else repr(getattr(server, "name", server))

    def get_tools(self, request: RolloutRequest) -> list[Any]:
        """The server's tools as OpenAI function tools: plain dicts carrying the full JSON Schema (a
        fresh copy; the same for every request)."""
        return copy.deepcopy(self._tools)

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        messages: list[MessageDict] = list(ctx.request.messages)
        for _ in range(ctx.request.max_turns):
            result = await ctx.chat(messages, **ctx.request.completion_params)
            messages.append(result.message)
            if not result.has_tool_calls:
                return ctx.complete(messages)
            messages.extend(await execute_tool_calls(result.tool_calls, lambda call: self._call(ctx, call)))
        return ctx.complete(messages, finish_reason="max_turns")

    async def _call(self, ctx: RolloutContext, tool_call: dict[str, Any]) -> MessageDict:
        """One tool call as a tool message; every failure becomes an ``Error: ...`` message the model sees."""
        started = time.perf_counter()
        call_id = str(tool_call.get("id") or "unknown")
        try:
            call_id, name, arguments = get_tool_call_info(tool_call)
            if not name:
                raise ToolArgumentError("the tool call names no function", tool_call_id=call_id)
            text, failed = await self._session.call_tool(name, arguments, self.tool_timeout)
        except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11 on
            logger.warning("tool call %s timed out after %gs", call_id, self.tool_timeout)
            return create_tool_error_result(call_id, f"the tool did not finish within {self.tool_timeout:g}s")
        except Exception as exc:
            logger.warning("tool call %s failed: %s: %s", call_id, type(exc).__name__, exc)
            return create_tool_error_result(call_id, str(exc) or type(exc).__name__)
        finally:
            ctx.record_tool_call((time.perf_counter() - started) * 1000.0)
        if failed:
            logger.warning("tool call %s (%s) reported an error: %s", call_id, name, text)
            return create_tool_error_result(call_id, text or "the tool reported an error")
        return create_tool_result(call_id, text)

    async def aclose(self) -> None:
        """Close the connection to the MCP server opened on the running event loop."""
        await self._session.aclose()
