"""``load_mcp_server`` on real directories: both import styles, exact restoration of ``sys``, no leaks
between directories, and one precise error per way a directory can be wrong."""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from osmosis_ai.rollout.mcp import MCPLoadError, load_mcp_server
from osmosis_ai.rollout.mcp.loader import package_name
from tests.rollout.mcp.conftest import CALCULATOR_MCP, SCHEMAS_MCP

if TYPE_CHECKING:
    from fastmcp import FastMCP

# fastmcp is imported by the tests that use it, not at collection: every pytest-xdist worker collects
# this module, one or two run it.


def _tool_names(server: FastMCP) -> set[str]:
    from fastmcp import Client

    async def listed() -> set[str]:
        async with Client(server) as client:
            return {tool.name for tool in await client.list_tools()}

    return asyncio.run(listed())


def _modules_from(directory: Path) -> list[str]:
    package = package_name(directory)
    return [
        name
        for name, module in list(sys.modules.items())
        if isinstance(getattr(module, "__file__", None), str)
        and Path(module.__file__).resolve().is_relative_to(directory)
        and not name.startswith(package)
    ]


def test_relative_and_legacy_absolute_sibling_imports_register_on_one_server() -> None:
    from fastmcp import FastMCP

    server = load_mcp_server(CALCULATOR_MCP)
    assert isinstance(server, FastMCP) and server.name == "calculator"
    # add/subtract come through `from .tools...`; multiply/divide through `from main import mcp`
    # in tools/division.py, which must be the same server, not a second copy of main.py.
    assert _tool_names(server) == {"add", "subtract", "multiply", "divide"}


def test_sys_path_meta_path_and_modules_outside_the_package_are_restored_exactly() -> None:
    path, meta_path = list(sys.path), list(sys.meta_path)
    load_mcp_server(CALCULATOR_MCP)
    assert sys.path == path and sys.meta_path == meta_path
    assert _modules_from(CALCULATOR_MCP) == []
    assert not {"main", "tools", "tools.numbers", "tools.division"} & set(sys.modules)
    assert f"{package_name(CALCULATOR_MCP)}.tools.division" in sys.modules  # lazy sibling imports still work


def test_two_directories_in_one_process_do_not_see_each_others_modules() -> None:
    calculator = load_mcp_server(CALCULATOR_MCP)
    schemas = load_mcp_server(SCHEMAS_MCP)  # its main.py names the server after ITS tools.FLAVOUR
    assert (calculator.name, schemas.name) == ("calculator", "schemas")
    assert "register" in _tool_names(schemas) and "register" not in _tool_names(calculator)
    assert load_mcp_server(CALCULATOR_MCP).name == "calculator"


def test_a_module_of_a_siblings_name_imported_earlier_neither_stands_in_nor_is_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stranger = types.ModuleType("tools")
    stranger.FLAVOUR = "stranger"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tools", stranger)
    assert load_mcp_server(SCHEMAS_MCP).name == "schemas"
    assert sys.modules["tools"] is stranger


def test_loading_again_runs_main_again(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("from fastmcp import FastMCP\nmcp = FastMCP('first')\n")
    assert load_mcp_server(tmp_path).name == "first"
    (tmp_path / "main.py").write_text("from fastmcp import FastMCP\nmcp = FastMCP('second')\n")
    assert load_mcp_server(tmp_path).name == "second"


def _failure(path: Path) -> str:
    with pytest.raises(MCPLoadError) as caught:
        load_mcp_server(path)
    assert not [n for n in sys.modules if n.startswith(package_name(path.resolve()))]
    return str(caught.value)


def test_each_way_a_directory_can_be_wrong_has_its_own_message(tmp_path: Path) -> None:
    assert "does not exist" in _failure(tmp_path / "missing")
    (tmp_path / "file.py").write_text("")
    assert "is not a directory" in _failure(tmp_path / "file.py")
    message = _failure(tmp_path)
    assert "has no main.py" in message and "FastMCP" in message and "@mcp.tool" in message


def test_an_import_error_in_main_names_the_file_and_the_cause(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("from fastmcp import FastMCP\nimport tools.nowhere\n")
    message = _failure(tmp_path)
    assert message.startswith(f"Error importing {tmp_path / 'main.py'}: ModuleNotFoundError")
    assert "tools" in message


def test_main_without_a_server_or_with_two_is_refused_with_how_to_fix(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("x = 1\n")
    assert "defines no FastMCP server" in _failure(tmp_path)
    (tmp_path / "main.py").write_text(
        "from fastmcp import FastMCP\na = FastMCP('a')\nb = FastMCP('b')\nc = a\n"
    )
    message = _failure(tmp_path)
    assert "several FastMCP servers (a, b)" in message and "mount" in message
