"""Tokens in the OS keyring: real ``keyring`` backends written for the tests, activated in-process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from osmosis_ai.auth import credentials as api
from osmosis_ai.auth import os_keyring, store
from osmosis_ai.auth.client import authenticated_request
from osmosis_ai.auth.errors import AuthenticationExpiredError
from osmosis_ai.auth.store import OrganizationInfo, UserInfo, WorkspaceCredentials
from tests.support.cli import REPO, subprocess_env

keyring = pytest.importorskip("keyring", reason="the optional 'keyring' package is not installed")
from keyring.backends import fail  # noqa: E402

from tests.support.keyring_backend import BrokenKeyring, FileKeyring  # noqa: E402

PLATFORM = "https://a.example.com"
TOKEN = "tok-keyring-secret-1"


def make(org_id: str = "org-1", name: str = "Acme", *, token: str = TOKEN) -> WorkspaceCredentials:
    now = datetime.now(timezone.utc)
    return WorkspaceCredentials(
        access_token=token,
        token_type="Bearer",
        expires_at=now + timedelta(days=30),
        user=UserInfo("u-1", "ada@example.com", "Ada"),
        organization=OrganizationInfo(org_id, name, "admin"),
        created_at=now,
        token_id="tid-1",
    )


@pytest.fixture
def credentials_file(config_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", PLATFORM)
    monkeypatch.delenv("OSMOSIS_KEYRING", raising=False)
    return config_dir / "credentials.json"


@pytest.fixture
def use_backend() -> Iterator[object]:
    """A function making a backend the process's keyring; the previous one is restored afterwards."""
    previous = keyring.get_keyring()
    yield keyring.set_keyring
    keyring.set_keyring(previous)


@pytest.fixture
def backend(tmp_path: Path, use_backend: object) -> FileKeyring:
    active = FileKeyring(tmp_path / "keyring.json")
    keyring.set_keyring(active)
    return active


def test_the_token_lives_in_the_keyring_and_not_in_the_file(credentials_file: Path, backend: FileKeyring):
    saved = store.save(make())
    assert saved.token_in_keyring
    assert TOKEN.encode() not in credentials_file.read_bytes()
    assert stat.S_IMODE(os.stat(credentials_file).st_mode) == 0o600
    record = json.loads(credentials_file.read_text())["platforms"][PLATFORM]["workspaces"]["org-1"]
    assert record["token_storage"] == "keyring" and "access_token" not in record
    assert backend.entries() == {f"osmosis-ai/org-1@{PLATFORM}": TOKEN}
    loaded = api.get_valid_credentials()
    assert loaded is not None and loaded.access_token == TOKEN and loaded.token_in_keyring


def test_other_changes_keep_the_token_in_the_keyring(credentials_file: Path, backend: FileKeyring):
    store.save(make())
    store.save(make("org-2", "Beta", token="tok-keyring-secret-2"))
    assert api.set_active_workspace("Acme")
    assert store.mark_invalid(make("org-2", "Beta", token="tok-keyring-secret-2"))
    data = credentials_file.read_bytes()
    assert b"tok-keyring-secret" not in data
    assert api.load_credentials().access_token == TOKEN  # type: ignore[union-attr]
    assert store.current_store().workspaces["org-2"].invalid


def test_logging_out_removes_the_keyring_entry(credentials_file: Path, backend: FileKeyring):
    store.save(make())
    store.save(make("org-2", "Beta", token="tok-keyring-secret-2"))
    assert api.delete_workspace_credentials("Acme")
    assert list(backend.entries()) == [f"osmosis-ai/org-2@{PLATFORM}"]
    assert api.delete_credentials()
    assert backend.entries() == {}


def test_a_keyring_that_refuses_leaves_the_token_in_the_file(credentials_file: Path, use_backend: object):
    keyring.set_keyring(BrokenKeyring())
    saved = store.save(make())
    assert not saved.token_in_keyring
    assert TOKEN.encode() in credentials_file.read_bytes()
    assert api.get_valid_credentials().access_token == TOKEN  # type: ignore[union-attr]


def test_keyrings_fail_backend_leaves_the_token_in_the_file(credentials_file: Path, use_backend: object):
    keyring.set_keyring(fail.Keyring())
    assert os_keyring.backend() is None
    store.save(make())
    assert TOKEN.encode() in credentials_file.read_bytes()
    assert api.get_valid_credentials().access_token == TOKEN  # type: ignore[union-attr]


def test_osmosis_keyring_0_keeps_the_token_in_the_file(
    credentials_file: Path, backend: FileKeyring, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OSMOSIS_KEYRING", "0")
    store.save(make())
    assert TOKEN.encode() in credentials_file.read_bytes()
    assert backend.entries() == {}


def test_a_token_the_keyring_cannot_give_back_means_log_in_again(
    credentials_file: Path, backend: FileKeyring, monkeypatch: pytest.MonkeyPatch
):
    store.save(make())
    keyring.set_keyring(BrokenKeyring())
    locked = api.load_credentials()
    assert locked is not None and not locked.is_usable() and api.get_valid_credentials() is None
    assert "KeyringLocked" in str(locked.token_problem) and "osmosis login" in str(locked.token_problem)
    with pytest.raises(AuthenticationExpiredError, match="osmosis login") as raised:
        authenticated_request("/api/cli/verify")
    assert TOKEN not in str(raised.value)

    keyring.set_keyring(backend)
    backend.delete_password("osmosis-ai", f"org-1@{PLATFORM}")  # removed behind our back
    gone = api.load_credentials()
    assert gone is not None and "no token" in str(gone.token_problem)

    monkeypatch.setenv("OSMOSIS_KEYRING", "0")
    off = api.load_credentials()
    assert off is not None and "OSMOSIS_KEYRING=0" in str(off.token_problem)


def test_a_new_login_replaces_an_unreadable_token(credentials_file: Path, backend: FileKeyring):
    store.save(make())
    backend.delete_password("osmosis-ai", f"org-1@{PLATFORM}")
    assert not api.load_credentials().is_usable()  # type: ignore[union-attr]
    store.save(make(token="tok-keyring-secret-new"))
    assert api.get_valid_credentials().access_token == "tok-keyring-secret-new"  # type: ignore[union-attr]


def test_file_held_tokens_keep_working_once_a_keyring_appears(
    credentials_file: Path, tmp_path: Path, use_backend: object, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OSMOSIS_KEYRING", "0")
    store.save(make())
    monkeypatch.delenv("OSMOSIS_KEYRING")
    keyring.set_keyring(FileKeyring(tmp_path / "keyring.json"))
    store.save(make("org-2", "Beta", token="tok-keyring-secret-2"))
    assert api.set_active_workspace("Acme")
    assert api.get_valid_credentials().access_token == TOKEN  # type: ignore[union-attr]
    data = credentials_file.read_bytes()
    assert TOKEN.encode() in data and b"tok-keyring-secret-2" not in data


def test_importing_the_package_and_help_do_not_import_keyring():
    code = (
        "import sys, osmosis_ai, osmosis_ai.auth.store, osmosis_ai.auth.credentials\n"
        "from osmosis_ai.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'keyring' not in sys.modules, 'keyring imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
