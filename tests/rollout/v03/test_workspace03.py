"""The scaffold ``osmosis rollout init`` writes is 0.3 code: its ``main.py`` runs unchanged under
upstream 0.3.8's own package (``eval run --python``), and ``osmosis eval run`` drives that server to
every row's reward."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.rollout.v03.served import without_this_repo
from tests.support.cli import EMPTY_CONFIG_DIR, REPO, cli
from tests.support.openai_server import OpenAIServer


def test_the_scaffold_runs_unchanged_on_upstream_0_3_8(
    upstream_python: Path, arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert cli("rollout", "init", "calc", cwd=workspace).returncode == 0
    config = workspace / "configs" / "eval" / "calc.toml"
    # This checkout runs the command (from its own directory); the server's interpreter sees no
    # PYTHONPATH, so its osmosis_ai is upstream's.
    env = {**without_this_repo(), "OSMOSIS_CONFIG_DIR": EMPTY_CONFIG_DIR, "XDG_STATE_HOME": str(tmp_path / "state"),
           "OSMOSIS_CACHE_DIR": str(tmp_path / "cache"), "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(tmp_path / "art")}  # fmt: skip
    ran = subprocess.run(
        [sys.executable, "-m", "osmosis_ai", "eval", "run", str(config), "--python", str(upstream_python),
         "--base-url", arithmetic.url, "--api-key", "k", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    log = (workspace / ".osmosis" / "logs" / "calc-server.log").read_text()
    assert ran.returncode == 0, ran.stderr + log[-3000:]
    summary = json.loads(ran.stdout)
    assert summary["outcomes"]["completed"] == 3 and summary["mean_score"]["value"] == 1.0
    assert "RolloutServer starting" not in log  # upstream's server, not this package's
