"""Running ``osmosis`` as a subprocess from the repository root, without Platform credentials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CALCULATOR = "examples.calculator.agent:agent_loop"
CALCULATOR_DATASET = REPO / "examples" / "calculator" / "dataset.jsonl"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OSMOSIS_ACCESS_TOKEN"}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def osmosis(*args: str, cwd: Path = REPO, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "osmosis_ai", *args],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
