from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.cli import REPO, subprocess_env
from tests.support.platform import StandInPlatform, assert_no_token, osmosis_on


def test_device_login_end_to_end(platform: StandInPlatform, config: Path):
    platform.device_script = ["authorization_pending"]
    result = osmosis_on(platform, config, "login", "--device")
    assert result.returncode == 0, result.stderr
    assert "enter the code:" in result.stdout
    assert "[OK] Logged in as ada@example.com" in result.stdout
    assert "Workspace: Acme (admin)" in result.stdout
    assert stat.S_IMODE(os.stat(config / "credentials.json").st_mode) == 0o600
    again = osmosis_on(platform, config, "login", "--device")
    assert again.returncode == 0 and "Already logged in" in again.stdout


def test_without_a_display_the_device_flow_is_offered(platform: StandInPlatform, config: Path):
    result = osmosis_on(platform, config, "login", "--json", env={"DISPLAY": "", "WAYLAND_DISPLAY": ""})
    assert result.returncode == 0, result.stderr
    assert "enter the code:" in result.stderr  # the instructions; stdout is the JSON result
    data = json.loads(result.stdout)
    assert data["logged_in"] and data["workspace"]["id"] == "org-1"


def test_a_denied_device_login_fails_cleanly(platform: StandInPlatform, config: Path):
    platform.device_script = ["access_denied"]
    result = osmosis_on(platform, config, "login", "--device")
    assert result.returncode == 1
    assert "[ERROR] the login was denied" in result.stderr
    assert not (config / "credentials.json").exists()


def test_two_concurrent_logins_keep_both_workspaces(platform: StandInPlatform, config: Path):
    def start(org: str) -> subprocess.Popen[str]:
        env = subprocess_env(
            OSMOSIS_PLATFORM_URL=platform.url, OSMOSIS_CONFIG_DIR=str(config), OSMOSIS_DEVICE_NAME=org
        )
        return subprocess.Popen(
            [sys.executable, "-m", "osmosis_ai", "login", "--device", "--force"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    # The stand-in hands out workspaces by device name, so both logins race for the file.
    platform.device_org_by_name = {"one": ("org-1", "One"), "two": ("org-2", "Two")}
    procs = [start("one"), start("two")]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert_no_token(platform, out + err)
    data = json.loads(osmosis_on(platform, config, "workspace", "list", "--json").stdout)
    assert sorted(w["id"] for w in data["workspaces"]) == ["org-1", "org-2"]
