"""``load_mcp_server``: import an MCP tools directory's ``main.py`` and return its ``FastMCP`` server.

The directory is imported as a package of its own, named after a digest of its absolute path, so
``from .tools import x`` works and two directories never share modules. Legacy absolute imports of the
directory's own modules (``import tools``, ``from main import mcp``) work too: while ``main.py`` runs, a
finder makes such a name an alias of the module inside that package, so each file is executed once and
``from main import mcp`` in a tool module gets the very server ``main.py`` created. Afterwards
``sys.path``, ``sys.meta_path`` and every ``sys.modules`` entry outside the package are as they were;
the package itself stays importable, for tools that import their siblings lazily. A module imported
earlier from elsewhere under a sibling's name (another directory's ``tools``) is set aside meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from osmosis_ai.rollout.mcp.errors import MCPLoadError
from osmosis_ai.rollout.mcp.session import import_fastmcp

__all__ = ["MCPLoadError", "load_mcp_server"]

_HOW_TO = (
    "an MCP tools directory needs a main.py that creates the server and registers its tools, e.g.\n"
    "    from fastmcp import FastMCP\n"
    "    mcp = FastMCP('my-tools')\n"
    "    @mcp.tool\n"
    "    def add(a: int, b: int) -> int: ..."
)


def package_name(directory: Path) -> str:
    """The synthetic package a directory is imported as."""
    return "_osmosis_mcp_" + hashlib.sha256(str(directory).encode()).hexdigest()[:8]


class _ExistingModule(importlib.abc.Loader):
    """Loads an alias: hands back a module already imported under its package name, unchanged."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.spec  # the import system stamped the alias's spec on it


class _SiblingAliases(importlib.abc.MetaPathFinder):
    """Resolves ``import tools`` (a file or folder of ``directory``) to ``<package>.tools``."""

    def __init__(self, directory: Path, package: str) -> None:
        self.directory = directory
        self.package = package
        self.aliases: set[str] = set()

    def is_sibling(self, name: str) -> bool:
        if not name.isidentifier() or name == "__pycache__":
            return False
        return (self.directory / f"{name}.py").is_file() or (self.directory / name).is_dir()

    def shadows(self, name: str) -> bool:
        """Whether the directory's module ``name`` takes the place of one imported before (never the
        standard library's: the directory goes first on ``sys.path`` only for what is not loaded yet)."""
        return name not in sys.stdlib_module_names and self.is_sibling(name)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top == self.package or not self.is_sibling(top):
            return None
        module = importlib.import_module(f"{self.package}.{fullname}")
        self.aliases.add(fullname)
        is_package = hasattr(module, "__path__")
        return importlib.machinery.ModuleSpec(fullname, _ExistingModule(module), is_package=is_package)


def _inside(module: Any, directory: Path) -> bool:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False
    try:
        return Path(file).resolve().is_relative_to(directory)
    except (OSError, ValueError):
        return False


def _purge_package(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


@contextlib.contextmanager
def _importing_from(directory: Path, package: str) -> Iterator[None]:
    """Run the block with ``directory`` importable as above; put ``sys`` back exactly afterwards."""
    saved_path = list(sys.path)
    saved_modules = dict(sys.modules)
    finder = _SiblingAliases(directory, package)
    for name in [n for n in sys.modules if finder.shadows(n.partition(".")[0])]:
        del sys.modules[name]  # a module of that name imported from elsewhere must not stand in for ours
    sys.meta_path.insert(0, finder)
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        sys.path[:] = saved_path
        for name, module in list(sys.modules.items()):
            if name == package or name.startswith(package + "."):
                continue
            if name in finder.aliases or (name not in saved_modules and _inside(module, directory)):
                del sys.modules[name]
        for name, module in saved_modules.items():  # anything the directory's code replaced
            if sys.modules.get(name) is not module:
                sys.modules[name] = module


def _register_package(directory: Path, package: str) -> None:
    spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    spec.submodule_search_locations = [str(directory)]
    module = importlib.util.module_from_spec(spec)
    module.__path__ = [str(directory)]
    sys.modules[package] = module


def _servers(module: types.ModuleType, server_type: type) -> dict[str, Any]:
    """The module's ``FastMCP`` objects by attribute name, each object once (its first name)."""
    found: dict[str, Any] = {}
    for attribute in dir(module):
        value = getattr(module, attribute, None)
        if isinstance(value, server_type) and all(value is not seen for seen in found.values()):
            found[attribute] = value
    return found


def load_mcp_server(mcp_path: str | os.PathLike[str]) -> Any:
    """Import ``mcp_path/main.py`` and return the ``fastmcp.FastMCP`` server it defines.

    Raises :class:`MCPLoadError` when the directory or its ``main.py`` is missing, fastmcp is not
    installed, ``main.py`` fails to import, or it defines no ``FastMCP`` server or several.
    """
    directory = Path(mcp_path).expanduser().resolve()
    if not directory.exists():
        raise MCPLoadError(f"MCP directory {directory} does not exist")
    if not directory.is_dir():
        raise MCPLoadError(f"{directory} is not a directory; give the directory that holds main.py")
    main = directory / "main.py"
    if not main.is_file():
        raise MCPLoadError(f"{directory} has no main.py; {_HOW_TO}")
    server_type = import_fastmcp().FastMCP
    package = package_name(directory)
    _purge_package(package)
    spec = importlib.util.spec_from_file_location(f"{package}.main", main)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    with _importing_from(directory, package):
        _register_package(directory, package)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # a main.py that calls exit() is a failed import too
            _purge_package(package)
            raise MCPLoadError(f"Error importing {main}: {type(exc).__name__}: {exc}") from exc
    servers = _servers(module, server_type)
    if len(servers) == 1:
        return next(iter(servers.values()))
    _purge_package(package)
    if not servers:
        raise MCPLoadError(f"{main} defines no FastMCP server at module level; {_HOW_TO}")
    raise MCPLoadError(
        f"{main} defines several FastMCP servers ({', '.join(servers)}); keep one at module level "
        "(mount the others on it with mcp.mount(...))"
    )
