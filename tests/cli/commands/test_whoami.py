from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import CALCULATOR
from tests.support.platform import StandInPlatform, osmosis_on


def test_whoami_when_not_logged_in(platform: StandInPlatform, config: Path):
    result = osmosis_on(platform, config, "whoami")
    assert result.returncode == 1
    assert "Not logged in" in result.stdout and "osmosis login" in result.stdout


def test_whoami_lists_the_workspaces(platform: StandInPlatform, config: Path):
    assert osmosis_on(platform, config, "login", "--device").returncode == 0
    platform.device_org = ("org-2", "Beta")
    assert osmosis_on(platform, config, "login", "--device", "--force").returncode == 0
    result = osmosis_on(platform, config, "whoami")
    assert result.returncode == 0, result.stderr
    assert "Email: ada@example.com" in result.stdout
    assert "Workspaces (2):" in result.stdout
    assert "  Beta (admin) (active)" in result.stdout
    data = json.loads(osmosis_on(platform, config, "whoami", "--json").stdout)
    assert [(w["id"], w["active"]) for w in data["workspaces"]] == [("org-1", False), ("org-2", True)]


def test_whoami_with_a_token_in_the_environment(platform: StandInPlatform, config: Path):
    token = platform.issue_token(org_id="org-ci", org_name="CI")
    result = osmosis_on(platform, config, "whoami", "--json", env={"OSMOSIS_TOKEN": token})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["source"] == "environment" and data["workspace"]["id"] == "org-ci"


def test_whoami_refuses_a_clear_text_platform(config: Path, platform: StandInPlatform):
    result = osmosis_on(
        platform, config, "whoami", env={"OSMOSIS_PLATFORM_URL": "http://platform.example.com"}
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: refusing the Platform URL")


def test_an_expired_login_is_shown_and_not_used(platform: StandInPlatform, config: Path):
    platform.verify_expires_at = None
    assert osmosis_on(platform, config, "login", "--device").returncode == 0
    document = json.loads((config / "credentials.json").read_text())
    (workspace,) = document["platforms"][platform.url]["workspaces"].values()
    workspace["expires_at"] = "2020-01-01T00:00:00+00:00"
    (config / "credentials.json").write_text(json.dumps(document))
    assert "  Acme (admin) (active) [expired]" in osmosis_on(platform, config, "whoami").stdout
    refused = osmosis_on(platform, config, "serve", "-m", CALCULATOR, "-p", "1")
    assert refused.returncode == 1
    assert "run 'osmosis login'" in refused.stderr
    assert platform.authorizations("/api/cli/rollout-server/register") == []
