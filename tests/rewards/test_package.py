"""``from osmosis_ai import osmosis_reward`` loads only cheap standard-library modules.

``inspect`` and ``typing`` cost milliseconds each; they are imported when the first function is
decorated. Checked in a fresh interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
before = set(sys.modules)
from osmosis_ai import osmosis_reward
after_import = sorted(set(sys.modules) - before)

@osmosis_reward
def reward(solution_str: str, ground_truth: str, extra_info: dict = None) -> float:
    return 1.0

print(json.dumps({"imported": after_import, "score": reward("a", "b"),
                  "stdlib": sorted(sys.stdlib_module_names)}))
"""

DEFERRED = {"inspect", "typing", "numbers", "asyncio", "dataclasses", "enum"}


def probe() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(done.stdout)


def test_import_loads_only_osmosis_modules_and_cheap_stdlib() -> None:
    report = probe()
    imported = set(report["imported"])  # type: ignore[arg-type]
    stdlib = set(report["stdlib"])  # type: ignore[arg-type]
    foreign = {m for m in imported if m.partition(".")[0] not in stdlib and not m.startswith("osmosis_ai")}
    assert foreign == set()
    assert imported & DEFERRED == set()
    assert report["score"] == 1.0
