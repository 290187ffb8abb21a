"""``make demo`` ends by saying what to run next: a command that works as printed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_ends_with_what_to_run_next() -> None:
    # -n prints the recipe without running it; touching nothing, the stamp is not rebuilt.
    recipe = subprocess.run(
        ["make", "-n", "-s", "demo", "-o", ".venv/.installed"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    run = recipe.index("osmosis rollout run")
    after = recipe[run:]
    assert "Next:" in after and "osmosis eval -m examples.calculator.agent:agent_loop" in after
    assert "--model scripted" in after.split("Next:", 1)[1]
