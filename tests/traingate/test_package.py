"""Importing ``osmosis_ai.traingate`` (and the rollout command) stays light."""

from __future__ import annotations

import subprocess
import sys


def test_importing_traingate_stays_light() -> None:
    code = (
        "import sys, osmosis_ai.traingate, osmosis_ai.cli.commands.rollout; "
        "print(sorted({'aiohttp', 'litellm', 'pydantic', 'rich', 'uvicorn'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
