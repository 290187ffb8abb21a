from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.cli import REPO, subprocess_env
from tests.support.platform import StandInPlatform, assert_no_token, osmosis_on


def test_device_login_end_to_end(platform: StandInPlatform, config: Path):
    platform.device_script = ["authorization_pending"]
    result = osmosis_on(platform, config, "login", "--device")
    assert result.returncode == 0, result.stderr
    assert "enter the code:" in result.stdout
    assert "[OK] Logged in as ada@example.com" in result.stdout.splitlines()
    assert "  Workspace: Acme (admin)" in result.stdout.splitlines()
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


def start_browser_login(
    platform: StandInPlatform, config: Path, *args: str
) -> tuple[subprocess.Popen[str], str]:
    """``osmosis login --no-browser`` running, and the login URL it printed."""
    env = subprocess_env(
        OSMOSIS_PLATFORM_URL=platform.url, OSMOSIS_CONFIG_DIR=str(config), PYTHONUNBUFFERED="1"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "osmosis_ai", "login", "--no-browser", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(platform.url + "/cli-auth?"):
            return proc, line.strip()
    proc.wait(timeout=10)
    raise AssertionError(f"no login URL printed; stderr: {proc.stderr.read() if proc.stderr else ''}")


def test_browser_login_end_to_end(platform: StandInPlatform, config: Path):
    proc, url = start_browser_login(platform, config)
    page = httpx.get(url, follow_redirects=True, timeout=30)  # the user's browser
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert page.status_code == 200 and "You are logged in" in page.text
    assert "[OK] Logged in as ada@example.com" in out
    assert_no_token(platform, out + err)
    assert osmosis_on(platform, config, "whoami").returncode == 0


def test_browser_login_denied(platform: StandInPlatform, config: Path):
    platform.cli_auth = "access_denied"
    proc, url = start_browser_login(platform, config)
    page = httpx.get(url, follow_redirects=True, timeout=30)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert page.status_code == 400
    assert "[ERROR] authentication failed: the user denied access" in err
    assert "Logged in" not in out


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None,
    reason="headless Chromium is not installed (Debian: apt-get install -y chromium; 'make test' installs it where it can)",
)
def test_browser_login_with_headless_chromium(platform: StandInPlatform, config: Path, tmp_path: Path):
    proc, url = start_browser_login(platform, config)
    chromium = [
        str(_chromium()),
        "--headless=new",
        "--no-sandbox",  # tests may run as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--dump-dom",
        url,
    ]
    page = subprocess.run(chromium, capture_output=True, text=True, timeout=120)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "You are logged in" in page.stdout, page.stderr[-2000:]
    assert "[OK] Logged in as ada@example.com" in out
    assert osmosis_on(platform, config, "whoami").returncode == 0


def test_with_an_os_keyring_the_token_stays_out_of_the_file(
    platform: StandInPlatform, config: Path, tmp_path: Path
):
    pytest.importorskip("keyring", reason="the optional 'keyring' package is not installed")
    # Subprocesses: keyring picks its backend from PYTHON_KEYRING_BACKEND once per process.
    keyring_file = tmp_path / "keyring.json"
    env = {
        "OSMOSIS_KEYRING": "1",
        "PYTHON_KEYRING_BACKEND": "tests.support.keyring_backend.FileKeyring",
        "OSMOSIS_TEST_KEYRING_FILE": str(keyring_file),
    }
    result = osmosis_on(platform, config, "login", "--device", env=env, process=True)
    assert result.returncode == 0, result.stderr
    (token,) = platform.tokens
    assert token.encode() not in (config / "credentials.json").read_bytes()
    assert token in json.loads(keyring_file.read_text()).values()
    assert osmosis_on(platform, config, "whoami", env=env, process=True).returncode == 0
    logout = osmosis_on(platform, config, "logout", "-y", env=env, process=True)
    assert "the token is revoked" in logout.stdout  # read back from the keyring to revoke it
    assert json.loads(keyring_file.read_text()) == {}
