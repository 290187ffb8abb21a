"""``osmosis_ai.rollout.mcp``: 0.2's import paths, and importing it costs nothing until a name is used."""

from __future__ import annotations

import subprocess
import sys

from tests.support.cli import subprocess_env


def test_the_0_2_import_paths_name_the_same_objects() -> None:
    from osmosis_ai.errors import OsmosisError
    from osmosis_ai.rollout import mcp
    from osmosis_ai.rollout.mcp.agent_loop import MCPAgentLoop
    from osmosis_ai.rollout.mcp.loader import MCPLoadError, load_mcp_server

    assert (mcp.MCPAgentLoop, mcp.MCPLoadError, mcp.load_mcp_server) == (
        MCPAgentLoop,
        MCPLoadError,
        load_mcp_server,
    )
    assert MCPAgentLoop.name == "mcp_agent" and issubclass(MCPLoadError, OsmosisError)


def test_importing_the_package_loads_neither_fastmcp_nor_pydantic() -> None:
    probe = (
        "import sys, osmosis_ai.rollout.mcp; print(sorted({'fastmcp', 'pydantic', 'mcp'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env=subprocess_env(), capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout == "[]\n", result.stderr
