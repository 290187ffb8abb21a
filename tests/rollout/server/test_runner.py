"""tune_gc changes the collector only when an application calls it (checked in a fresh process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import gc, json
import osmosis_ai.rollout.server.runner as runner
before = gc.get_threshold()
runner.tune_gc()
print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count()]))
"""


def test_importing_the_runner_leaves_the_gc_alone_and_tune_gc_tunes_it():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    before, after, frozen = json.loads(out.stdout)
    assert tuple(before) != tuple(after)
    assert after[0] > before[0]  # the young generation is collected less often
    assert frozen > 0
