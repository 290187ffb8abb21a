"""The error of the MCP integration: a tools directory or server that cannot be turned into an agent."""

from __future__ import annotations

from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError


class MCPLoadError(OsmosisRolloutError):
    """An MCP tools directory (or a running MCP server) could not be loaded.

    The message says what is wrong and what would fix it: a missing directory or ``main.py``, fastmcp not
    installed, ``main.py`` failing to import, no (or more than one) ``FastMCP`` server in it, or a server
    whose tools could not be listed.
    """
