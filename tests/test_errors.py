"""The error tree drawn in ``osmosis_ai.errors``'s docstring matches the classes that exist.

Every module of the package is imported, then ``OsmosisError.__subclasses__()`` is walked. Private
classes (``_Name``) are see-through: their children hang from the nearest public ancestor, as drawn.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import NamedTuple

import pytest

import osmosis_ai
import osmosis_ai.errors
from osmosis_ai.errors import OsmosisError

_LINE = re.compile(r"^(?P<branch>[ │├└─]*)(?P<name>\w+)(?: \((?P<builtins>[\w, ]+)\))?\s+(?P<module>[\w.]+)$")


class Node(NamedTuple):
    parent: str | None
    builtins: frozenset[str]
    module: str


def _drawn_tree() -> dict[str, Node]:
    doc = osmosis_ai.errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    nodes: dict[str, Node] = {}
    ancestors: list[str] = []  # ancestors[depth] = the class drawn last at that depth
    for raw in block.splitlines():
        line = raw[4:]  # the literal block's indentation
        match = _LINE.match(line)
        assert match, f"cannot read this line of the drawn tree: {raw!r}"
        branch = match["branch"]
        assert len(branch) % 4 == 0, f"misaligned line in the drawn tree: {raw!r}"
        depth = len(branch) // 4
        assert depth <= len(ancestors), f"line skips a level in the drawn tree: {raw!r}"
        del ancestors[depth:]
        name = match["name"]
        assert name not in nodes, f"{name} is drawn twice"
        builtins = frozenset(b.strip() for b in (match["builtins"] or "").split(",") if b.strip())
        nodes[name] = Node(ancestors[-1] if ancestors else None, builtins, match["module"])
        ancestors.append(name)
    return nodes


def _import_everything() -> None:
    for module in pkgutil.walk_packages(osmosis_ai.__path__, "osmosis_ai."):
        if module.name.rsplit(".", 1)[-1] != "__main__":
            importlib.import_module(module.name)


def _public_parent(cls: type) -> type:
    """The nearest public ``OsmosisError`` ancestor (private helper bases are skipped)."""
    parents = [base for base in cls.__bases__ if issubclass(base, OsmosisError)]
    assert len(parents) == 1, f"{cls.__name__} has {len(parents)} OsmosisError bases; a tree needs one"
    parent = parents[0]
    return _public_parent(parent) if parent.__name__.startswith("_") else parent


def _builtin_bases(cls: type) -> frozenset[str]:
    """Builtin exception types ``cls`` (or a private base between it and its public parent) adds."""
    names: set[str] = set()
    for base in cls.__bases__:
        if issubclass(base, OsmosisError):
            if base.__name__.startswith("_"):
                names |= _builtin_bases(base)
        elif base.__module__ == "builtins":
            names.add(base.__name__)
    return frozenset(names)


def _existing_tree() -> dict[str, Node]:
    _import_everything()
    nodes: dict[str, Node] = {"OsmosisError": Node(None, frozenset(), OsmosisError.__module__)}
    pending = list(OsmosisError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if not cls.__module__.startswith("osmosis_ai.") or cls.__name__.startswith("_"):
            continue
        if cls.__module__.startswith("osmosis_ai.cli."):  # the application's error, not the libraries'
            continue
        assert cls.__name__ not in nodes, f"two error classes are named {cls.__name__}"
        nodes[cls.__name__] = Node(_public_parent(cls).__name__, _builtin_bases(cls), cls.__module__)
    return nodes


@pytest.fixture(scope="module")
def trees() -> tuple[dict[str, Node], dict[str, Node]]:
    return _drawn_tree(), _existing_tree()


def test_every_existing_error_class_is_drawn(trees: tuple[dict[str, Node], dict[str, Node]]) -> None:
    drawn, existing = trees
    missing = sorted(set(existing) - set(drawn))
    assert not missing, f"error classes missing from the tree in osmosis_ai/errors.py: {missing}"


def test_every_drawn_class_exists(trees: tuple[dict[str, Node], dict[str, Node]]) -> None:
    drawn, existing = trees
    gone = sorted(set(drawn) - set(existing))
    assert not gone, f"the tree in osmosis_ai/errors.py draws classes that do not exist: {gone}"


def test_drawn_parents_builtins_and_modules_are_the_real_ones(
    trees: tuple[dict[str, Node], dict[str, Node]],
) -> None:
    drawn, existing = trees
    wrong = {
        name: {"drawn": drawn[name], "real": existing[name]}
        for name in sorted(set(drawn) & set(existing))
        if drawn[name] != existing[name]
    }
    assert not wrong, f"the tree in osmosis_ai/errors.py differs from the classes: {wrong}"


def test_error_classes_are_exported_where_drawn() -> None:
    for name, node in _drawn_tree().items():
        module = importlib.import_module(node.module)
        assert isinstance(getattr(module, name, None), type), f"{node.module} has no class {name}"


def test_verdict_error_keeps_its_parsing_import_path() -> None:
    from osmosis_ai.judge.errors import VerdictError
    from osmosis_ai.judge.parsing import VerdictError as FromParsing

    assert FromParsing is VerdictError
    assert issubclass(VerdictError, ValueError)
