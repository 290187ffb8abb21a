from __future__ import annotations

import json
from pathlib import Path

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


def test_empty_list_and_usage(platform: StandInPlatform, config: Path):
    assert "Not logged in" in osmosis_on(platform, config, "workspace", "list").stdout
    assert json.loads(osmosis_on(platform, config, "workspace", "list", "--json").stdout) == {
        "workspaces": []
    }
    usage = osmosis_on(platform, config, "workspace")
    assert usage.returncode == 0 and "usage: osmosis workspace" in usage.stdout
