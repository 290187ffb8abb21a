from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.platform import StandInPlatform, osmosis_on


def _two_workspaces(platform: StandInPlatform, config: Path) -> None:
    assert osmosis_on(platform, config, "login", "--device").returncode == 0
    platform.device_org = ("org-2", "Beta")
    assert osmosis_on(platform, config, "login", "--device", "--force").returncode == 0


def test_list_current_and_switch(platform: StandInPlatform, config: Path):
    _two_workspaces(platform, config)
    listed = osmosis_on(platform, config, "workspace", "list")
    assert listed.stdout.splitlines() == ["  Acme (admin)", "  Beta (admin) (active)"]
    switched = osmosis_on(platform, config, "workspace", "switch", "Acme")
    assert switched.returncode == 0 and "Switched to workspace 'Acme'" in switched.stdout
    current = osmosis_on(platform, config, "workspace", "current")
    assert current.stdout.startswith("Current workspace: Acme (admin)")
    assert "  User: ada@example.com" in current.stdout
    data = json.loads(osmosis_on(platform, config, "workspace", "current", "--json").stdout)
    assert data["workspace"]["id"] == "org-1"
    assert "access_token" not in json.dumps(data)


def test_switch_to_an_unknown_workspace(platform: StandInPlatform, config: Path):
    _two_workspaces(platform, config)
    result = osmosis_on(platform, config, "workspace", "switch", "Nope")
    assert result.returncode == 1
    assert "No workspace named 'Nope'" in result.stdout


@pytest.mark.parametrize("action", ["list", "current"])
def test_not_logged_in_is_one_line_and_exit_1_and_usage_is_0(
    platform: StandInPlatform, config: Path, action: str
):
    shown = osmosis_on(platform, config, "workspace", action)
    assert (
        shown.returncode == 1
        and shown.stdout.startswith("Not logged in")
        and len(shown.stdout.splitlines()) == 1
    )
    as_json = osmosis_on(platform, config, "workspace", action, "--json")
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and data["error"]["message"].startswith("Not logged in")
    assert data[{"list": "workspaces", "current": "workspace"}[action]] in ([], None)
    usage = osmosis_on(platform, config, "workspace")
    assert usage.returncode == 0 and "usage: osmosis workspace" in usage.stdout
