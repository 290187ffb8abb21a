"""The Makefile: ``make demo`` installs what its run needs and ends by saying what to run next (a
command that works as printed); ``make test`` installs every extra into the same .venv; the
editable install is a plain path entry."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _recipe(*targets: str) -> str:
    # -n prints the recipes without running them; -B takes every target as out of date (a fresh .venv).
    return subprocess.run(
        ["make", "-n", "-s", *targets], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


@needs_make
def test_make_demo_ends_with_what_to_run_next() -> None:
    recipe = _recipe("demo", "-o", ".venv/.installed-demo")  # touching nothing, the stamp is not rebuilt
    run = recipe.index("osmosis rollout run")
    after = recipe[run:]
    assert "Next:" in after and "osmosis eval -m examples.calculator.agent:agent_loop" in after
    assert "--model scripted" in after.split("Next:", 1)[1]


@needs_make
def test_the_demo_installs_the_server_extra_and_make_test_every_extra() -> None:
    demo = _recipe("-B", ".venv/.installed-demo")
    assert "-e '.[server]'" in demo and "[all" not in demo
    full = _recipe("-B", ".venv/.installed")
    assert "-e '.[all,dev]'" in full
    assert ".venv/.installed-demo" in full  # a demo after make test installs nothing more
    for recipe in (demo, full):
        assert "editable_mode" not in recipe  # setuptools' default: see the last test


def test_all_holds_every_extra() -> None:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (spec,) = extras["all"]
    assert spec.startswith("osmosis-ai[")
    assert set(spec.removeprefix("osmosis-ai[").removesuffix("]").split(",")) == set(extras) - {
        "all",
        "full",
        "dev",
    }


def test_the_editable_install_adds_no_import_hook_to_interpreter_start() -> None:
    # An editable install by import hook would load its finder, pathlib and typing in every
    # interpreter (the start-up benchmark's bare start); a path entry in a .pth file loads nothing.
    code = (
        "import sys; print(sorted(m for m in sys.modules if 'editable' in m or m in ('pathlib', 'typing')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


@needs_make
def test_make_test_compiles_the_bytecode_once_before_the_workers_start() -> None:
    # On a fresh clone the xdist workers would each compile the same modules at the same moment.
    bytecode = _recipe("-B", ".venv/.bytecode", "-o", ".venv/.installed")
    assert "pytest --collect-only" in bytecode and "import_litellm()" in bytecode and "compileall" in bytecode
    assert "touch .venv/.bytecode" in bytecode  # once: a second run finds the stamp
    test = _recipe("test", "-o", ".venv/.installed")  # the stamp may exist: its recipe is checked above
    steps = next(line for line in test.splitlines() if "upstream03" in line)
    assert ".venv/.bytecode" in steps and test.index(steps) < test.index("pytest -n")
