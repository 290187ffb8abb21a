"""The package runs on the oldest Python it claims (``requires-python``): every module compiles
there, and a standard-library module newer than it is imported only under a ``sys.version_info``
check with a fallback."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.support.upstream03 import find_python

ROOT = Path(__file__).resolve().parents[1]
OLDEST = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"].removeprefix(">=")

# Run by the oldest Python: compile every module, and name its standard library.
PROBE = """
import json, pathlib, sys
failed = []
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    try:
        compile(path.read_bytes(), str(path), "exec")
    except SyntaxError as exc:
        failed.append(f"{path}:{exc.lineno}: {exc.msg}")
print(json.dumps({"failed": failed, "stdlib": sorted(sys.stdlib_module_names)}))
"""


def _guarded(tree: ast.Module) -> set[int]:
    """Line numbers of the imports under an ``if sys.version_info ...`` check that has a fallback
    (an ``else``: without one, the name is missing on the older Python)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "version_info" in ast.unparse(node.test) and node.orelse:
            for child in ast.walk(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    lines.add(child.lineno)
    return lines


def test_every_module_compiles_and_imports_only_the_standard_library_of_the_oldest_python() -> None:
    python = find_python(OLDEST)
    if python is None:
        pytest.skip(f"no Python {OLDEST} on this machine (pyenv or python{OLDEST} on PATH)")
    probe = subprocess.run([python, "-c", PROBE, str(ROOT / "osmosis_ai")], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert found["failed"] == []
    newer = set(sys.stdlib_module_names) - set(found["stdlib"])
    unguarded = []
    for path in sorted((ROOT / "osmosis_ai").rglob("*.py")):
        tree = ast.parse(path.read_bytes())
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            if node.lineno not in guarded and any(name.split(".")[0] in newer for name in names):
                unguarded.append(f"{path.relative_to(ROOT)}:{node.lineno}: {', '.join(names)}")
    assert unguarded == [], f"new in Python > {OLDEST}: guard with sys.version_info and a fallback"


def test_only_an_import_with_a_fallback_counts_as_guarded() -> None:
    with_fallback = "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\nelse:\n    import tomli as tomllib\n"
    without = "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\n"
    assert _guarded(ast.parse(with_fallback)) == {3, 5}
    assert _guarded(ast.parse(without)) == set()
