"""Rules for the whole ``benchmarks`` package: it stands on its own, without tests/ or ../shared."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_no_benchmark_imports_tests() -> None:
    for path in BENCHMARKS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            assert not any(m == "tests" or m.startswith("tests.") for m in modules), (
                f"{path.name} imports tests"
            )
