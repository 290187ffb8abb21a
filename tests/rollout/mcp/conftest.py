"""The MCP tools directories the tests load (written for this project, in the git-sync example's layout),
and the same tools served over streamable HTTP by a fastmcp subprocess on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import REPO
from tests.support.sockets import free_port
from tests.support.waiting import wait_until

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CALCULATOR_MCP = FIXTURES / "calculator" / "mcp"  # main.py + tools/, relative and legacy absolute imports
SCHEMAS_MCP = FIXTURES / "schemas" / "mcp"  # nested models, a failing, a slow and a rendezvous tool

_SERVE = (
    "import sys\n"
    "from osmosis_ai.rollout.mcp import load_mcp_server\n"
    "load_mcp_server(sys.argv[1]).run(transport='streamable-http', host='127.0.0.1', port=int(sys.argv[2]))\n"
)


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    """URL of the schemas tools served over streamable HTTP by fastmcp in a subprocess on loopback."""
    port = free_port()
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(SCHEMAS_MCP), str(port)],
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _accepts(port) or process.poll() is not None, timeout=30, what="the MCP server")
        assert process.poll() is None, "the MCP server exited at start-up"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
