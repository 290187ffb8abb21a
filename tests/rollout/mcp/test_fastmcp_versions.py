"""The MCP integration on every fastmcp major version the ``mcp`` extra allows: the virtualenv holds the
newest, and the MCP tests run again in a subprocess against the oldest (installed once, see
``tests/support/fastmcp_oldest.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import REPO
from tests.support.fastmcp_oldest import InstallError, ensure, oldest_allowed

OLDEST_RUN_ENV = "OSMOSIS_TEST_FASTMCP_OLDEST"
HERE = Path(__file__).resolve().parent
AGAINST_THE_OLDEST = [
    "test_loader.py",
    "test_agent_loop.py",
    "test_session.py",
    "test_fastmcp_versions.py",
    "test_commands.py::test_osmosis_rollout_run_serves_an_mcp_directory_to_the_local_traingate",
]


def _major(version: str) -> int:
    return int(version.split(".")[0])


def test_the_fastmcp_in_use_is_the_one_this_run_is_for() -> None:
    import fastmcp  # here, not at collection, which every pytest-xdist worker does

    expected = os.environ.get(OLDEST_RUN_ENV)
    if expected:
        assert fastmcp.__version__.startswith(expected)
    else:
        assert _major(oldest_allowed()) < _major(fastmcp.__version__) < 5


def test_the_mcp_tests_pass_on_the_oldest_fastmcp_allowed() -> None:
    if os.environ.get(OLDEST_RUN_ENV):
        pytest.skip("this is the run against the oldest fastmcp")
    try:
        target = ensure()
    except InstallError as exc:
        pytest.skip(f"cannot install the oldest allowed fastmcp: {exc}")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(target), str(REPO)]),
        OLDEST_RUN_ENV: oldest_allowed(),
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:randomly",
            *(str(HERE / test) for test in AGAINST_THE_OLDEST),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
