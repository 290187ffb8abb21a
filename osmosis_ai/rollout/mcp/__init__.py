"""MCP tools as an agent: load a tools directory (``main.py`` creating a ``FastMCP`` server) or connect
to a running MCP server, and let :class:`MCPAgentLoop` call the model and those tools.

Names resolve lazily (PEP 562): importing this package loads neither fastmcp nor pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "MCPAgentLoop": "osmosis_ai.rollout.mcp.agent_loop",
    "MCPLoadError": "osmosis_ai.rollout.mcp.errors",
    "load_mcp_server": "osmosis_ai.rollout.mcp.loader",
    "tool_from_mcp": "osmosis_ai.rollout.mcp.schema",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from osmosis_ai.rollout.mcp.agent_loop import MCPAgentLoop
    from osmosis_ai.rollout.mcp.errors import MCPLoadError
    from osmosis_ai.rollout.mcp.loader import load_mcp_server
    from osmosis_ai.rollout.mcp.schema import tool_from_mcp
