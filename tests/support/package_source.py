"""The package's own source, parsed once per process for the tests that read its code without importing
it (its layers, one of each, no import through a 0.2 path): every module's file and syntax tree."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "osmosis_ai"

# The tests of tests/test_layers.py and tests/test_one_of_each.py, and the 0.2-path walk of
# tests/test_compat_paths.py, run on one pytest-xdist worker (--dist loadgroup), which parses the
# package once for them all.
XDIST_GROUP = "package-source"


@functools.cache
def package_trees() -> tuple[tuple[Path, ast.Module], ...]:
    """Every ``.py`` file under ``osmosis_ai/`` in path order, with its syntax tree (not to be changed:
    the callers share it)."""
    return tuple(
        (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    )
