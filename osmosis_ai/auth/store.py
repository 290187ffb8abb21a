"""The credentials store: one JSON file, workspaces grouped by the Platform URL they came from.

File format (``version`` 2)::

    {"version": 2,
     "platforms": {"https://platform.osmosis.ai": {
         "active_workspace": "<workspace key>" | null,
         "workspaces": {"<workspace key>": {"access_token", "token_type", "expires_at", "created_at",
                                            "user": {...}, "organization": {...}, "token_id"?, "invalid"?,
                                            "token_storage"?}}}}}

A workspace's key is its organization id (stable; names are chosen by users and may repeat), or
``name:<organization name>`` when the Platform sent no id. A version 1 file (one flat ``workspaces``
table keyed by organization name, no Platform) is read as belonging to the default Platform, and
rewritten as version 2 by the next change.

Where a real OS keyring is available (:mod:`osmosis_ai.auth.os_keyring`), a login's token is put
there and its record says ``"token_storage": "keyring"`` instead of holding ``access_token``; when
the keyring is absent, turned off or refuses, the token is written to the file as before. Records
written either way, and 0.2's files, are read alike. A token the keyring cannot give back makes that
workspace unusable (``token_problem`` says why and how to log in again); nothing else is affected.

Safety of the file:

* The file is only ever replaced, never edited in place: a new file is created next to it with
  ``O_EXCL`` and mode 0600 (readable by the owner from its first byte), written, ``fsync``-ed and
  renamed over the old one. Readers see the old file or the new one, never a half-written one.
* Every read-modify-write holds an exclusive ``flock`` on a sibling lock file, so two ``osmosis login``
  processes each add their workspace instead of one overwriting the other.
* The directory is created 0700 (and tightened to 0700 when it is group/other accessible).
* A file that cannot be parsed is never overwritten: the first read that finds it so renames it
  (``credentials.json.unreadable-<time>``, under the lock, and only if it is still the same file)
  and raises :class:`UnreadableCredentialsError` naming where it is kept; the next read sees no
  file (not logged in) and a login starts a new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from osmosis_ai.auth import os_keyring, settings
from osmosis_ai.auth.errors import CredentialsStoreError, KeyringTokenError, UnreadableCredentialsError

try:  # POSIX; without it (Windows) writes are still atomic but not serialised between processes
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None  # type: ignore[assignment]

FORMAT_VERSION = 2
KEYRING_STORAGE = "keyring"
T = TypeVar("T")


def parse_timestamp(value: str) -> datetime:
    """An ISO-8601 timestamp with an offset (``Z`` accepted); a naive one is a ``ValueError``."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no UTC offset")
    return parsed


@dataclass
class UserInfo:
    id: str
    email: str
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "email": self.email, "name": self.name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UserInfo:
        name = data.get("name")
        return cls(id=str(data.get("id") or ""), email=str(data.get("email") or ""), name=name or None)


@dataclass
class OrganizationInfo:
    id: str
    name: str
    role: str = "member"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "role": self.role}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OrganizationInfo:
        return cls(
            id=str(data.get("id") or ""),
            name=str(data.get("name") or ""),
            role=str(data.get("role") or "member"),
        )


@dataclass
class WorkspaceCredentials:
    """One workspace's token and who it belongs to. The token is left out of ``repr``.

    ``platform_url`` is the Platform the token was issued by (set when loaded from or saved to the
    store); the client refuses to send the token anywhere else. ``invalid`` is set when that Platform
    answered 401 to it. ``token_in_keyring`` says the file holds a marker and the OS keyring the
    token; ``token_problem`` (never stored) says why such a token could not be read back.
    """

    access_token: str = field(repr=False)
    token_type: str
    expires_at: datetime
    user: UserInfo
    organization: OrganizationInfo
    created_at: datetime
    token_id: str | None = None
    platform_url: str | None = None
    invalid: bool = False
    token_in_keyring: bool = False
    token_problem: str | None = None

    @property
    def workspace_key(self) -> str:
        """The stable key of this workspace in the store."""
        return self.organization.id or f"name:{self.organization.name}"

    @property
    def workspace_name(self) -> str:
        return self.organization.name or self.organization.id or "(unnamed)"

    def is_expired(self) -> bool:
        if self.expires_at.tzinfo is None:
            raise ValueError("expires_at must carry a UTC offset")
        return datetime.now(timezone.utc) >= self.expires_at

    def is_usable(self) -> bool:
        """Neither expired, nor rejected by the Platform, nor with a token the keyring cannot give."""
        return not self.invalid and not self.token_problem and not self.is_expired()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "token_type": self.token_type,
            "expires_at": self.expires_at.isoformat(),
            "created_at": self.created_at.isoformat(),
            "user": self.user.to_dict(),
            "organization": self.organization.to_dict(),
        }
        if self.token_in_keyring:
            data["token_storage"] = KEYRING_STORAGE
        else:
            data["access_token"] = self.access_token
        if self.token_id:
            data["token_id"] = self.token_id
        if self.invalid:
            data["invalid"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], platform_url: str | None = None) -> WorkspaceCredentials:
        """Raises ``KeyError``/``ValueError``/``TypeError`` for a malformed record.

        A record whose token is in the keyring comes back with an empty ``access_token``;
        :meth:`load_keyring_token` fills it in.
        """
        created = data.get("created_at")
        in_keyring = data.get("token_storage") == KEYRING_STORAGE
        return cls(
            access_token="" if in_keyring else str(data["access_token"]),
            token_type=str(data.get("token_type") or "Bearer"),
            expires_at=parse_timestamp(str(data["expires_at"])),
            user=UserInfo.from_dict(dict(data["user"])),
            organization=OrganizationInfo.from_dict(dict(data["organization"])),
            created_at=parse_timestamp(str(created)) if created else datetime.now(timezone.utc),
            token_id=str(data["token_id"]) if data.get("token_id") else None,
            platform_url=platform_url,
            invalid=bool(data.get("invalid", False)),
            token_in_keyring=in_keyring,
        )

    def load_keyring_token(self) -> None:
        """Fill in a keyring-held token, or set ``token_problem`` when the keyring cannot give it."""
        if not self.token_in_keyring or self.access_token or self.token_problem:
            return
        try:
            url = self.platform_url or settings.platform_url()
            self.access_token = os_keyring.load_token(url, self.workspace_key, self.workspace_name)
        except KeyringTokenError as exc:
            self.token_problem = str(exc)


@dataclass
class CredentialsStore:
    """The workspaces of one Platform: ``workspaces`` by key, in the order they were added."""

    active_workspace: str | None = None
    workspaces: dict[str, WorkspaceCredentials] = field(default_factory=dict)

    def get_active_credentials(self) -> WorkspaceCredentials | None:
        if self.active_workspace is None:
            return None
        return self.workspaces.get(self.active_workspace)

    def find(self, name_or_key: str) -> str | None:
        """The key of the workspace with this key, else the one with this organization name.

        Raises :class:`CredentialsStoreError` when several workspaces share the name.
        """
        if name_or_key in self.workspaces:
            return name_or_key
        matches = [k for k, c in self.workspaces.items() if c.organization.name == name_or_key]
        if len(matches) > 1:
            raise CredentialsStoreError(
                f"several workspaces are named {name_or_key!r}; use the workspace id instead "
                f"({', '.join(matches)})"
            )
        return matches[0] if matches else None

    def add(self, credentials: WorkspaceCredentials) -> None:
        """Add or replace ``credentials`` and make its workspace the active one."""
        self.workspaces[credentials.workspace_key] = credentials
        self.active_workspace = credentials.workspace_key

    def remove(self, key: str) -> WorkspaceCredentials | None:
        removed = self.workspaces.pop(key, None)
        if removed is not None and self.active_workspace == key:
            self.active_workspace = next(iter(self.workspaces), None)
        return removed

    def to_dict(self) -> dict[str, Any]:
        """The store in the layout of a version 1 credentials file (one Platform)."""
        return {"version": 1, **_store_to_json(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], platform_url: str | None = None) -> CredentialsStore:
        """A store read from :meth:`to_dict`'s layout; its workspaces belong to ``platform_url``
        (default: the Platform in use)."""
        return _store_from_json(data, platform_url or settings.platform_url())


def _store_from_json(data: dict[str, Any], platform_url: str) -> CredentialsStore:
    store = CredentialsStore()
    workspaces = data.get("workspaces") or {}
    if not isinstance(workspaces, dict):
        raise ValueError("'workspaces' is not an object")
    old_active = data.get("active_workspace")
    for old_key, record in workspaces.items():
        credentials = WorkspaceCredentials.from_dict(record, platform_url)
        store.workspaces[credentials.workspace_key] = credentials
        if old_key == old_active:
            store.active_workspace = credentials.workspace_key
    if store.active_workspace is None and old_active in store.workspaces:
        store.active_workspace = old_active
    return store


def _store_to_json(store: CredentialsStore) -> dict[str, Any]:
    return {
        "active_workspace": store.active_workspace,
        "workspaces": {key: c.to_dict() for key, c in store.workspaces.items()},
    }


def parse_document(data: Any) -> dict[str, CredentialsStore]:
    """The stores of a parsed credentials file (version 1 or 2), by Platform URL."""
    if not isinstance(data, dict):
        raise ValueError("the file is not a JSON object")
    version = data.get("version", 1)
    if version == 1:
        url = settings.DEFAULT_PLATFORM_URL
        return {url: _store_from_json(data, url)}
    if version != FORMAT_VERSION:
        raise ValueError(f"unknown credentials file version {version!r}")
    platforms = data.get("platforms") or {}
    if not isinstance(platforms, dict):
        raise ValueError("'platforms' is not an object")
    return {url: _store_from_json(section, url) for url, section in platforms.items()}


class CredentialsFile:
    """The credentials file at ``path`` (default: :func:`settings.credentials_file`, read at each use)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self._path = Path(path) if path is not None else None

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else settings.credentials_file()

    def _ensure_directory(self) -> Path:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if directory.stat().st_mode & 0o077:
            os.chmod(directory, 0o700)
        return directory

    def read_all(self) -> dict[str, CredentialsStore]:
        """Every Platform's store, tokens included; empty when there is no file.

        Raises :class:`CredentialsStoreError`.
        """
        stores = self._parse()
        for store in stores.values():
            for credentials in store.workspaces.values():
                credentials.load_keyring_token()
        return stores

    def _parse(self, *, locked: bool = False) -> dict[str, CredentialsStore]:
        """Every Platform's store as the file has it: keyring-held tokens not fetched.

        An unparseable file is set aside and :class:`UnreadableCredentialsError` raised; ``locked``
        says the caller holds the lock already.
        """
        for _ in range(2):  # a second look when another process replaced the file meanwhile
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return {}
            except OSError as exc:
                raise CredentialsStoreError(f"cannot read {self.path}: {exc.strerror or exc}") from None
            try:
                return parse_document(json.loads(raw.decode("utf-8")))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                problem = type(exc).__name__
            if locked:
                kept = self._set_aside(raw)
            else:
                with self._locked():
                    kept = self._set_aside(raw)
            if kept is not None:
                raise UnreadableCredentialsError(
                    f"the credentials file {self.path} is unreadable ({problem}); it is kept as {kept}; "
                    "run 'osmosis login' to start a new one",
                    kept=kept,
                )
        raise CredentialsStoreError(f"the credentials file {self.path} keeps changing; try again")

    def read(self, platform_url: str) -> CredentialsStore:
        """The store of ``platform_url`` (a normalised URL), tokens included; empty when there is none."""
        store = self._parse().get(platform_url) or CredentialsStore()
        for credentials in store.workspaces.values():
            credentials.load_keyring_token()
        return store

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        directory = self._ensure_directory()
        if fcntl is None:  # pragma: no cover
            yield
            return
        fd = os.open(directory / (self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _set_aside(self, seen: bytes) -> Path | None:
        """Rename the file to ``<name>.unreadable-<time>`` if it still holds ``seen`` (the lock held);
        ``None`` when it changed or went away meanwhile."""
        try:
            if self.path.read_bytes() != seen:
                return None
        except FileNotFoundError:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S")
        kept = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
        count = 1
        while kept.exists():
            count += 1
            kept = self.path.with_name(f"{self.path.name}.unreadable-{stamp}-{count}")
        os.rename(self.path, kept)
        return kept

    def update(
        self, change: Callable[[dict[str, CredentialsStore]], T], *, set_aside_unreadable: bool = False
    ) -> T:
        """Apply ``change`` to every store under the lock, write the result, return ``change``'s value.

        Tokens kept in the OS keyring are not fetched for ``change`` (their ``access_token`` is empty).

        An unreadable file is set aside and raises :class:`UnreadableCredentialsError`, or with
        ``set_aside_unreadable`` is replaced by an empty store.
        """
        try:
            with self._locked():
                try:
                    stores = self._parse(locked=True)
                except UnreadableCredentialsError:
                    if not set_aside_unreadable:
                        raise
                    stores = {}
                result = change(stores)
                self._write(stores)
                return result
        except OSError as exc:
            raise CredentialsStoreError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def _write(self, stores: dict[str, CredentialsStore]) -> None:
        document = {
            "version": FORMAT_VERSION,
            "platforms": {url: _store_to_json(s) for url, s in stores.items() if s.workspaces},
        }
        payload = json.dumps(document, indent=2).encode("utf-8")
        directory = self.path.parent
        # mkstemp opens with O_CREAT | O_EXCL and mode 0600: no moment where others can read it.
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        with contextlib.suppress(OSError):  # make the rename durable where directories can be opened
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


# -- operations on the current Platform's store -----------------------------------------------------


def _file(file: CredentialsFile | None) -> CredentialsFile:
    return file if file is not None else CredentialsFile()


def save(credentials: WorkspaceCredentials, *, file: CredentialsFile | None = None) -> WorkspaceCredentials:
    """Store ``credentials`` under its Platform (default: the current one) and make it active.

    The token goes to the OS keyring when a real one takes it, else into the file.
    """
    url = credentials.platform_url or settings.platform_url()
    stored = replace(credentials, platform_url=url, token_problem=None)

    def change(stores: dict[str, CredentialsStore]) -> None:
        store = stores.setdefault(url, CredentialsStore())
        previous = store.workspaces.get(stored.workspace_key)
        # Under the lock, so that the keyring entry and the file's marker agree between two logins.
        stored.token_in_keyring = os_keyring.store_token(url, stored.workspace_key, stored.access_token)
        if not stored.token_in_keyring and previous is not None and previous.token_in_keyring:
            os_keyring.delete_token(url, stored.workspace_key)  # an older token must not linger there
        store.add(stored)

    _file(file).update(change, set_aside_unreadable=True)
    return stored


def mark_invalid(credentials: WorkspaceCredentials, *, file: CredentialsFile | None = None) -> bool:
    """Flag the stored record holding exactly this token as rejected; ``False`` if it is not stored."""
    url = credentials.platform_url or settings.platform_url()

    def change(stores: dict[str, CredentialsStore]) -> bool:
        stored = stores.get(url, CredentialsStore()).workspaces.get(credentials.workspace_key)
        if stored is None:
            return False
        stored.load_keyring_token()
        if stored.access_token != credentials.access_token:
            return False
        stored.invalid = True
        return True

    return _file(file).update(change)


def remove(
    keys: list[str] | None, *, platform_url: str | None = None, file: CredentialsFile | None = None
) -> list[WorkspaceCredentials]:
    """Remove the workspaces ``keys`` (all of this Platform's with ``None``) and their keyring entries.

    Returns those removed, without their tokens when these were kept in the keyring.
    """
    url = platform_url or settings.platform_url()
    store_file = _file(file)
    if not store_file.path.exists():
        return []

    def change(stores: dict[str, CredentialsStore]) -> list[WorkspaceCredentials]:
        store = stores.get(url)
        if store is None:
            return []
        targets = list(store.workspaces) if keys is None else keys
        return [c for c in (store.remove(k) for k in targets) if c is not None]

    removed = store_file.update(change)
    for credentials in removed:
        if credentials.token_in_keyring:
            os_keyring.delete_token(url, credentials.workspace_key)
    return removed


def activate(name_or_key: str, *, file: CredentialsFile | None = None) -> WorkspaceCredentials | None:
    """Make the named workspace of the current Platform active; ``None`` if there is no such one."""
    url = settings.platform_url()

    def change(stores: dict[str, CredentialsStore]) -> WorkspaceCredentials | None:
        store = stores.get(url)
        key = store.find(name_or_key) if store is not None else None
        if store is None or key is None:
            return None
        store.active_workspace = key
        return store.workspaces[key]

    store_file = _file(file)
    if not store_file.path.exists():
        return None
    return store_file.update(change)


def current_store(*, file: CredentialsFile | None = None) -> CredentialsStore:
    """The current Platform's workspaces."""
    return _file(file).read(settings.platform_url())
