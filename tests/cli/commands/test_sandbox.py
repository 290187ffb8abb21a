"""osmosis sandbox check: the mechanisms and the tier in force, as a table or one JSON object."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli import cli

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def test_check_names_every_mechanism_and_the_tier() -> None:
    ran = cli("sandbox", "check")
    assert ran.returncode == 0, ran.stderr
    for name in (
        "bubblewrap",
        "user namespace",
        "PID namespace",
        "network namespace",
        "seccomp",
        "Landlock",
        "cgroups",
    ):
        assert name in ran.stdout
    assert "Tier in force: local" in ran.stdout


def test_check_as_json() -> None:
    ran = cli("sandbox", "check", "--json")
    value = json.loads(ran.stdout)
    assert ran.returncode == 0 and value["tier"] == "local" and value["refusal"] is None
    assert {m["name"] for m in value["mechanisms"] if m["used"]} >= {
        "bubblewrap",
        "rlimits (prlimit)",
        "deadline backstop (timeout)",
    }
