from __future__ import annotations

import json
from pathlib import Path

from tests.support.platform import StandInPlatform, osmosis_on


def _login(platform: StandInPlatform, config: Path, org: tuple[str, str] = ("org-1", "Acme")) -> str:
    platform.device_org = org
    before = set(platform.tokens)
    assert osmosis_on(platform, config, "login", "--device", "--force").returncode == 0
    (token,) = set(platform.tokens) - before
    return token


def test_logout_revokes_the_token(platform: StandInPlatform, config: Path):
    token = _login(platform, config)
    result = osmosis_on(platform, config, "logout", "-y")
    assert result.returncode == 0, result.stderr
    assert "the token is revoked" in result.stdout
    assert platform.tokens[token].revoked
    assert osmosis_on(platform, config, "whoami").returncode == 1


def test_logout_says_when_it_only_forgot_the_token(platform: StandInPlatform, config: Path):
    token = _login(platform, config)
    url = platform.url
    platform.stop()
    result = osmosis_on(platform, config, "logout", "-y", env={"OSMOSIS_PLATFORM_URL": url})
    assert result.returncode == 0
    assert "on this machine only" in result.stdout and "stays valid until it expires" in result.stdout
    assert not platform.tokens[token].revoked


def test_logout_menu_and_all(platform: StandInPlatform, config: Path):
    _login(platform, config, ("org-1", "Acme"))
    _login(platform, config, ("org-2", "Beta"))
    cancelled = osmosis_on(platform, config, "logout", input="0\n")
    assert "Cancelled." in cancelled.stdout and cancelled.returncode == 0
    invalid = osmosis_on(platform, config, "logout", input="7\n")
    assert "Invalid selection." in invalid.stdout and invalid.returncode == 1
    picked = osmosis_on(platform, config, "logout", input="1\ny\n")
    assert "Logged out of Acme" in picked.stdout
    data = json.loads(osmosis_on(platform, config, "logout", "--all", "-y", "--json").stdout)
    assert [(w["workspace"], w["revoked"]) for w in data["logged_out"]] == [("Beta", True)]
    assert "Not logged in." in osmosis_on(platform, config, "logout").stdout


def test_declining_the_confirmation_keeps_the_login(platform: StandInPlatform, config: Path):
    _login(platform, config)
    result = osmosis_on(platform, config, "logout", input="n\n")
    assert "Cancelled." in result.stdout
    assert osmosis_on(platform, config, "whoami").returncode == 0
