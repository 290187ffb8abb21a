"""``benchmarks.v03_servers`` runs every side end to end (its figures are measured by hand, not here)."""

from __future__ import annotations

import pytest

from benchmarks import v03_servers
from tests.support import upstream03


def test_both_servers_serve_every_rollout_of_the_same_program() -> None:
    if upstream03.ensure() is None:
        pytest.skip("no Python 3.12 on this machine (pyenv or python3.12 on PATH): upstream 0.3.8 needs it")
    upstream, ours = v03_servers.SIDES
    bare = v03_servers.BARE
    roots = {upstream: None, ours: v03_servers.REPO, bare: v03_servers.REPO}
    figures = v03_servers.measure(20, [5], 1, roots)
    for side in (upstream, ours, bare):  # every rollout succeeded on each side (measure raises otherwise)
        assert figures[5][side]["rollouts_per_s"] > 0 and figures[5][side]["cpu_ms"] > 0
    assert figures[5][upstream]["paired_cpu"] > 0 and figures[5][bare]["paired_cpu"] > 0
    assert figures[5][v03_servers.ALONE]["cpu_ms"] > 0
