"""``osmosis validate`` through the command line's ``main()`` in this process:
validation codes, agent loading errors, async ``get_tools``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.cli import ASYNC_TOOLS_AGENT, CALCULATOR, cli

BAD_AGENTS = """
from osmosis_ai.rollout import RolloutAgentLoop


class Base(RolloutAgentLoop):
    name = "base"

    def get_tools(self, request):
        return []

    async def run(self, ctx):
        return ctx.complete([])


class NoneTools(Base):
    def get_tools(self, request):
        return None


class Raising(Base):
    def get_tools(self, request):
        raise RuntimeError("no tools today")


class TupleTools(Base):
    def get_tools(self, request):
        return ({"type": "function", "function": {"name": "a", "description": "d"}},)


class BadDicts(Base):
    def get_tools(self, request):
        return [{"type": "function"}, {"type": "function", "function": {"name": "x"}}]


class SyncRun(Base):
    def run(self, ctx):
        return None


blank = Base()
blank.name = "  "
numbered = Base()
numbered.name = 5
not_an_agent = object()
"""


@pytest.fixture
def bad_agents(tmp_path: Path) -> Path:
    (tmp_path / "bad_agents.py").write_text(textwrap.dedent(BAD_AGENTS))
    return tmp_path


def test_validate_accepts_the_calculator():
    result = cli("validate", "-m", CALCULATOR)
    assert result.returncode == 0, result.stderr
    assert "validated successfully (4 tools)" in result.stdout


@pytest.mark.parametrize(
    ("attribute", "codes"),
    [
        ("NoneTools", ["GET_TOOLS_RETURNS_NONE"]),
        ("Raising", ["GET_TOOLS_EXCEPTION"]),
        ("TupleTools", ["GET_TOOLS_INVALID_TYPE"]),
        ("BadDicts", ["MISSING_FUNCTION", "INVALID_TOOL_SCHEMA", "MISSING_FUNCTION_DESCRIPTION"]),
        ("SyncRun", ["RUN_NOT_ASYNC"]),
        ("blank", ["EMPTY_NAME"]),
        ("numbered", ["INVALID_NAME_TYPE"]),
    ],
)
def test_validate_reports_codes_and_exits_1(bad_agents: Path, attribute: str, codes: list[str]):
    result = cli("validate", "-v", "-m", f"bad_agents:{attribute}", cwd=bad_agents)
    assert result.returncode == 1
    for code in codes:
        assert f"[{code}]" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon_here", "expected 'module.path:attribute'"),
        ("surely_missing_module_xyz:agent", "cannot import module 'surely_missing_module_xyz'"),
        ("examples.calculator.agent:nope", "agent loops defined there: CalculatorAgentLoop, agent_loop"),
        ("bad_agents:not_an_agent", "not a RolloutAgentLoop"),
        ("bad_agents:missing", "agent loops defined there: BadDicts, Base, NoneTools"),
    ],
)
def test_agent_loading_errors_are_one_line(bad_agents: Path, spec: str, message: str):
    result = cli("validate", "-m", spec, cwd=bad_agents)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_accepts_an_async_get_tools(tmp_path: Path):
    (tmp_path / "async_agent.py").write_text(ASYNC_TOOLS_AGENT)
    result = cli("validate", "-m", "async_agent:agent_loop", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "'async_tools' validated successfully (1 tools)" in result.stdout


def test_validate_refuses_a_coroutine_from_a_plain_get_tools(tmp_path: Path):
    (tmp_path / "async_agent.py").write_text(ASYNC_TOOLS_AGENT)
    result = cli("validate", "-m", "async_agent:SyncReturnsCoroutine", cwd=tmp_path)
    assert result.returncode == 1
    assert "[GET_TOOLS_INVALID_TYPE]" in result.stderr and "async def get_tools" in result.stderr
    assert "never awaited" not in result.stderr  # the coroutine is closed, not leaked
