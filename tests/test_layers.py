"""The package's layers, read from its imports: the never-rules of docs/design/layers.md.

Every ``import`` and ``from ... import`` in the package counts, at any depth of a module (a function's
lazy import too), except those under ``if TYPE_CHECKING:`` (they never run). A package is the first
name under ``osmosis_ai`` (a subpackage, or a top-level module). A failure names each offending
import as ``module:line -> imported module``.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.package_source import PACKAGE, XDIST_GROUP, package_trees

pytestmark = pytest.mark.xdist_group(XDIST_GROUP)

BASE = {"errors", "outcome", "statistics", "consts", "_lazy", "_aliases", "_pool", "_http", "_usercode",
        "_sockets", "_litellm", "_sync", "_deadline"}  # fmt: skip
SEAMS = {"models", "_http", "errors", "outcome"}
BELOW_SEAMS = BASE | {"observe"}  # traces and metrics: every seam reports to them, they know no feature
APPLICATION = {"cli", "__main__"}  # the command line and `python -m osmosis_ai`
# The finder serving 0.2's import paths loads their table, whose 0.2 helpers reach any layer (0.2
# had them in cli_services): the imports that point up by design.
BY_DESIGN = {("_aliases", "_compat")}
COMPAT = "_compat"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "osmosis_ai"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, imported module)`` of every import in ``path`` (whose syntax tree is ``tree``) that runs."""
    module = _module_name(path)
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return [
        (line, target) for line, target in found if target == "osmosis_ai" or target.startswith("osmosis_ai.")
    ]


@functools.cache
def _edges() -> dict[tuple[str, str], list[str]]:
    """Package -> package, each with the imports that make it (``module:line -> target``). Read at the
    first test that asks, not at collection: every pytest-xdist worker collects this module, one runs it."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path, tree in package_trees():
        module = _module_name(path)
        for line, target in _imports(path, tree):
            source, imported = _package(module), _package(target)
            if source != imported and imported != "osmosis_ai":
                edges[(source, imported)].append(f"{module}:{line} -> {target}")
    return edges


def _offending(pairs: set[tuple[str, str]]) -> list[str]:
    return [why for pair in sorted(pairs) for why in _edges()[pair]]


def test_the_walk_reads_the_package() -> None:
    edges = _edges()
    assert ("runs", "rewards") in edges and ("cli", "runs") in edges  # a walk that read nothing passes all


def test_no_two_packages_import_each_other() -> None:
    edges = _edges()
    both = {(a, b) for a, b in edges if (b, a) in edges}
    assert not both, "packages that import each other:\n" + "\n".join(_offending(both))


def test_no_circle_of_any_length() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in _edges():
        if (source, target) not in BY_DESIGN:
            graph[source].add(target)
    circles = []
    for start in sorted(graph):
        path = [start]
        stack = [iter(sorted(graph[start]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                path.pop()
            elif nxt == start:
                circles.append([*path, start])
                break
            elif nxt not in path and nxt > start:  # each circle found once, from its smallest package
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    lines = [" -> ".join(c) + ":\n  " + "\n  ".join(_offending(set(itertools.pairwise(c)))) for c in circles]
    assert not circles, "circles between packages:\n" + "\n".join(lines)


def test_cli_is_imported_by_nothing() -> None:
    upward = {(s, t) for s, t in _edges() if t == "cli" and s not in APPLICATION and s != COMPAT}
    assert not upward, "library code importing the application:\n" + "\n".join(_offending(upward))


def test_the_run_engine_imports_no_application() -> None:
    upward = {(source, target) for source, target in _edges() if source == "runs" and target == "cli"}
    assert not upward, "\n".join(_offending(upward))


def test_the_seams_import_only_base_modules() -> None:
    wrong = {(s, t) for s, t in _edges() if s in SEAMS | {"observe"} and t not in BELOW_SEAMS}
    assert not wrong, "a seam importing a feature package:\n" + "\n".join(_offending(wrong))


def test_base_modules_import_only_base_modules() -> None:
    wrong = {(s, t) for s, t in _edges() if s in BASE and t not in BASE and (s, t) not in BY_DESIGN}
    assert not wrong, "a base module importing a feature package:\n" + "\n".join(_offending(wrong))
