"""``tests/support/cli.py``'s ``cli()``: a command run in this process leaves the process as it found it,
so the next test's run sees what a fresh subprocess would."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from tests.support.cli import cli, osmosis

AGENT = """
from osmosis_ai.rollout import RolloutAgentLoop

TOOLS = [{{"type": "function", "function": {{"name": f"t{{i}}", "description": "A tool.",
          "parameters": {{"type": "object", "properties": {{}}, "required": []}}}}}} for i in range({tools})]


class Agent(RolloutAgentLoop):
    name = "agent"

    def get_tools(self, request):
        return TOOLS

    async def run(self, ctx):
        return ctx.complete(list(ctx.request.messages), reward=1.0)


agent_loop = Agent()
"""


def _agent_dir(directory: Path, tools: int) -> Path:
    directory.mkdir()
    (directory / "same_name_agent.py").write_text(AGENT.format(tools=tools))
    (directory / ".env").write_text("OSMOSIS_TEST_FROM_DOTENV=1\n")
    return directory


def test_a_run_leaves_the_process_as_it_found_it(tmp_path: Path) -> None:
    before = (dict(os.environ), os.getcwd(), list(sys.path), list(logging.root.handlers), logging.root.level)
    result = cli("validate", "-v", "-m", "same_name_agent:agent_loop", cwd=_agent_dir(tmp_path / "one", 1))
    assert result.returncode == 0, result.stderr
    assert "validated successfully (1 tools)" in result.stdout
    after = (dict(os.environ), os.getcwd(), list(sys.path), list(logging.root.handlers), logging.root.level)
    assert after == before  # .env loaded for the run only, cwd and sys.path back, logging untouched
    assert "same_name_agent" not in sys.modules  # imported from a temporary directory: forgotten


def test_an_agent_module_of_the_same_name_elsewhere_is_imported_afresh(tmp_path: Path) -> None:
    first = cli("validate", "-m", "same_name_agent:agent_loop", cwd=_agent_dir(tmp_path / "one", 1))
    second = cli("validate", "-m", "same_name_agent:agent_loop", cwd=_agent_dir(tmp_path / "two", 3))
    assert "validated successfully (1 tools)" in first.stdout
    assert "validated successfully (3 tools)" in second.stdout


def test_status_output_and_input_are_those_of_a_subprocess(tmp_path: Path) -> None:
    for args in (["--version"], ["no-such-command"], ["validate", "-m", "nope"]):
        ran, process = cli(*args), osmosis(*args)
        assert (ran.returncode, ran.stdout, ran.stderr) == (
            process.returncode,
            process.stdout,
            process.stderr,
        )


async def test_an_async_test_awaits_cli_async_instead(tmp_path: Path) -> None:
    from tests.support.cli import cli_async

    with pytest.raises(RuntimeError, match="await cli_async"):
        cli("--version")
    assert (await cli_async("--version")).returncode == 0
