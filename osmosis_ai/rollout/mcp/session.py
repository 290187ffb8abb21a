"""One fastmcp client connection per event loop, shared by every rollout on that loop.

Only fastmcp's public client API is used (``fastmcp.Client``: ``list_tools``, ``call_tool_mcp``), which
talks to an in-process ``FastMCP`` server over memory and to a running server over streamable HTTP
alike, and which every fastmcp release from 2.3 on offers. Results are read in the MCP wire shape
(``model_dump(by_alias=True)``: ``content``, ``structuredContent``, ``isError``), which does not change
when fastmcp's Python attribute names do.

The connection is opened lazily on the loop that first calls a tool and held by a task of its own, so
it is entered and left in the same task whatever fastmcp version runs (older ones require that); a
connection that ended (a server restart) is reopened on the next call. Concurrent calls share it: MCP
multiplexes requests over one session.

An event loop keeps only a weak reference to a task, so the holding tasks are kept in :data:`_HOLDERS`
until they end: a session dropped without :meth:`ToolSession.aclose` (``osmosis test`` lets its agent go
when the run ends, before its loop does) would otherwise have its holder destroyed by the garbage
collector in the middle of the connection, which asyncio reports on stderr. Kept, the holder is
cancelled with the loop's other tasks and leaves the connection as fastmcp expects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from osmosis_ai._lazy import install_hint
from osmosis_ai.rollout.mcp.errors import MCPLoadError

_HOLDERS: set[asyncio.Task[None]] = set()


def import_fastmcp() -> Any:
    """The ``fastmcp`` module, or :class:`MCPLoadError` naming the extra that installs it."""
    try:
        import fastmcp
    except ImportError as exc:
        raise MCPLoadError(
            f"MCP tools need fastmcp, which is not installed; {install_hint('fastmcp')}"
        ) from exc
    return fastmcp


def tool_result_text(result: Any) -> tuple[str, bool]:
    """``(text for the model, whether the tool reported an error)`` of an MCP ``CallToolResult``."""
    wire = result.model_dump(mode="json", by_alias=True) if hasattr(result, "model_dump") else dict(result)
    structured = wire.get("structuredContent")
    is_error = bool(wire.get("isError"))
    if isinstance(structured, Mapping) and not is_error:
        value: Any = structured["result"] if set(structured) == {"result"} else dict(structured)
        return _serialize(value), False
    texts = [
        str(item.get("text"))
        for item in wire.get("content") or ()
        if isinstance(item, Mapping) and item.get("text")
    ]
    return "\n".join(texts), is_error


def _serialize(value: Any) -> str:
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value, default=str)


class ToolSession:
    """Lists and calls the tools of one MCP server (a ``FastMCP`` object or a URL) through fastmcp's client."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: asyncio.Future[Any] | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool in the MCP wire shape (``name``, ``description``, ``inputSchema``)."""
        client = await self._connected()
        tools = await client.list_tools()
        return [tool.model_dump(mode="json", by_alias=True) for tool in tools]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], timeout: float | None
    ) -> tuple[str, bool]:
        """``(text, is_error)`` of one tool call; ``TimeoutError`` when it takes longer than ``timeout``."""
        client = await self._connected()
        result = await asyncio.wait_for(client.call_tool_mcp(name, arguments), timeout)
        return tool_result_text(result)

    async def aclose(self) -> None:
        """Close this loop's connection (a no-op when none is open)."""
        holder, stop = self._holder, self._stop
        self._loop = self._client = self._holder = self._stop = None
        if holder is not None and stop is not None and not holder.done():
            stop.set()
            await holder

    async def _connected(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._holder is None or self._holder.done():
            fastmcp = import_fastmcp()
            self._loop, self._stop = loop, asyncio.Event()
            self._client = loop.create_future()
            self._holder = loop.create_task(self._hold(fastmcp.Client(self.target), self._client, self._stop))
            _HOLDERS.add(self._holder)
            self._holder.add_done_callback(_HOLDERS.discard)
        assert self._client is not None
        return await asyncio.shield(self._client)

    @staticmethod
    async def _hold(client: Any, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        try:
            async with client:
                ready.set_result(client)
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
        finally:
            if not ready.done():  # cancelled before connecting: waiters must not hang
                ready.cancel()
