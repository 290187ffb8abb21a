from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from osmosis_ai.auth import credentials as api
from osmosis_ai.auth import store
from osmosis_ai.auth.errors import CredentialsStoreError
from osmosis_ai.auth.store import CredentialsFile, OrganizationInfo, UserInfo, WorkspaceCredentials
from tests.support.cli import REPO

PLATFORM_A = "https://a.example.com"
PLATFORM_B = "https://b.example.com"


def make(
    org_id: str = "org-1", name: str = "Acme", *, token: str = "tok-secret-1", days: float = 30
) -> WorkspaceCredentials:
    now = datetime.now(timezone.utc)
    return WorkspaceCredentials(
        access_token=token,
        token_type="Bearer",
        expires_at=now + timedelta(days=days),
        user=UserInfo("u-1", "ada@example.com", "Ada"),
        organization=OrganizationInfo(org_id, name, "admin"),
        created_at=now,
        token_id="tid-1",
    )


@pytest.fixture
def platform_a(config_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", PLATFORM_A)
    return config_dir / "credentials.json"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_every_write_leaves_the_file_0600_and_the_directory_0700_whatever_the_umask(platform_a: Path):
    previous = os.umask(0)  # a careless umask must not make the token world-readable
    try:
        writes = [
            lambda: api.save_credentials(make("org-1", "Acme")),
            lambda: api.save_credentials(make("org-2", "Beta", token="tok-secret-2")),
            lambda: api.set_active_workspace("Acme"),
            lambda: store.mark_invalid(api.load_credentials()),  # type: ignore[arg-type]
            lambda: api.delete_workspace_credentials("Beta"),
        ]
        for write in writes:
            write()
            assert mode(platform_a) == 0o600
            assert mode(platform_a.parent) == 0o700
            assert [p.name for p in platform_a.parent.iterdir() if p.name.endswith(".tmp")] == []
    finally:
        os.umask(previous)


def test_an_open_directory_is_tightened(platform_a: Path):
    platform_a.parent.mkdir(parents=True)
    os.chmod(platform_a.parent, 0o755)
    api.save_credentials(make())
    assert mode(platform_a.parent) == 0o700


def test_workspaces_are_keyed_by_organization_id(platform_a: Path):
    api.save_credentials(make("org-1", "Same"))
    api.save_credentials(make("org-2", "Same", token="tok-secret-2"))
    assert [c.organization.id for _, c, _ in api.get_all_workspaces()] == ["org-1", "org-2"]
    with pytest.raises(CredentialsStoreError, match="several workspaces"):
        api.set_active_workspace("Same")
    assert api.set_active_workspace("org-1")
    assert api.get_active_workspace() == "Same"
    assert api.load_credentials().organization.id == "org-1"  # type: ignore[union-attr]


def test_removing_the_active_workspace_activates_the_next(platform_a: Path):
    api.save_credentials(make("org-1", "Acme"))
    api.save_credentials(make("org-2", "Beta", token="tok-secret-2"))
    assert api.delete_workspace_credentials("Beta")
    assert api.get_active_workspace() == "Acme"
    assert not api.delete_workspace_credentials("Beta")
    assert api.delete_credentials()
    assert api.load_credentials() is None


def test_a_0_2_file_is_read_as_the_default_platforms(config_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OSMOSIS_PLATFORM_URL", raising=False)
    old = make("org-9", "Legacy", token="tok-legacy").to_dict()
    old["expires_at"] = old["expires_at"].replace("+00:00", "Z")
    config_dir.mkdir(parents=True)
    path = config_dir / "credentials.json"
    path.write_text(json.dumps({"version": 1, "active_workspace": "Legacy", "workspaces": {"Legacy": old}}))
    loaded = api.load_credentials()
    assert loaded is not None and loaded.access_token == "tok-legacy"
    assert loaded.platform_url == "https://platform.osmosis.ai"
    api.save_credentials(make("org-1", "Acme"))
    assert {c.organization.name for _, c, _ in api.get_all_workspaces()} == {"Legacy", "Acme"}
    assert json.loads(path.read_text())["version"] == 2


def test_an_unreadable_file_is_set_aside_not_overwritten(platform_a: Path):
    platform_a.parent.mkdir(parents=True)
    platform_a.write_text("{not json")
    with pytest.raises(CredentialsStoreError, match="unreadable"):
        api.load_credentials()
    api.save_credentials(make())
    kept = [p for p in platform_a.parent.iterdir() if ".unreadable-" in p.name]
    assert len(kept) == 1 and kept[0].read_text() == "{not json"
    assert api.load_credentials() is not None


def test_expired_and_rejected_credentials_are_not_valid(platform_a: Path):
    api.save_credentials(make(days=-1))
    assert api.load_credentials() is not None
    assert api.get_valid_credentials() is None
    api.save_credentials(make())
    assert api.get_valid_credentials() is not None
    assert store.mark_invalid(api.load_credentials())  # type: ignore[arg-type]
    assert api.get_valid_credentials() is None


def test_credentials_belong_to_the_platform_they_came_from(platform_a: Path, monkeypatch: pytest.MonkeyPatch):
    api.save_credentials(make())
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", PLATFORM_B)
    assert api.load_credentials() is None
    assert api.get_all_workspaces() == []
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", PLATFORM_A + "/")
    assert api.load_credentials() is not None


def test_the_token_is_not_in_repr(platform_a: Path):
    assert "tok-secret-1" not in repr(make())


CONCURRENT_WRITER = """
import sys
from datetime import datetime, timedelta, timezone
from osmosis_ai.auth import store
from osmosis_ai.auth.store import OrganizationInfo, UserInfo, WorkspaceCredentials
prefix = sys.argv[1]
now = datetime.now(timezone.utc)
for i in range(15):
    store.save(WorkspaceCredentials("tok-" + prefix + str(i), "Bearer", now + timedelta(days=1),
               UserInfo("u", "u@example.com"), OrganizationInfo(f"{prefix}-{i}", f"{prefix}{i}"), now))
"""


def test_concurrent_writers_do_not_lose_each_others_workspaces(platform_a: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, prefix], env=env) for prefix in ("a", "b")
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    keys = {c.organization.id for _, c, _ in api.get_all_workspaces()}
    assert keys == {f"{p}-{i}" for p in ("a", "b") for i in range(15)}
    assert mode(platform_a) == 0o600


def test_an_explicit_file_path_is_honoured(tmp_path: Path, platform_a: Path):
    own = CredentialsFile(tmp_path / "elsewhere" / "creds.json")
    store.save(make(), file=own)
    assert own.read(PLATFORM_A).get_active_credentials() is not None
    assert not platform_a.exists()


def test_a_directory_that_cannot_be_written_is_a_typed_error(platform_a: Path):
    platform_a.parent.parent.mkdir(parents=True)
    platform_a.parent.write_text("")  # the config directory's name is taken by a file
    with pytest.raises(CredentialsStoreError, match="cannot"):
        api.save_credentials(make())
