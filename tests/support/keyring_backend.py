"""Real ``keyring`` backends for tests: the store's keyring code runs unchanged against them.

* :class:`FileKeyring` keeps entries in the JSON file named by ``OSMOSIS_TEST_KEYRING_FILE``, so a
  CLI subprocess can use it through ``PYTHON_KEYRING_BACKEND=tests.support.keyring_backend.FileKeyring``
  and the test can look inside afterwards.
* :class:`BrokenKeyring` raises on every call, like a locked or crashing system keyring.

``keyring`` tries every backend class it knows when it picks a default; both classes refuse to be
built without being asked for (a ``TypeError``, which ``keyring`` skips), so importing this module
never changes which keyring another test gets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked, PasswordDeleteError

KEYRING_FILE_ENV = "OSMOSIS_TEST_KEYRING_FILE"


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]  # a plain number is what keyring compares

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()
        if path is None and not os.environ.get(KEYRING_FILE_ENV):
            raise TypeError(f"FileKeyring needs a path or {KEYRING_FILE_ENV}")
        self.path = path if path is not None else Path(os.environ[KEYRING_FILE_ENV])

    def entries(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def _save(self, entries: dict[str, str]) -> None:
        self.path.write_text(json.dumps(entries), encoding="utf-8")

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        entries = self.entries()
        entries[f"{service}/{username}"] = password
        self._save(entries)

    def delete_password(self, service: str, username: str) -> None:
        entries = self.entries()
        if entries.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("no such entry")
        self._save(entries)


class BrokenKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self, *, error: type[Exception] = KeyringLocked) -> None:
        super().__init__()
        self.error = error

    def get_password(self, service: str, username: str) -> str | None:
        raise self.error("the keyring is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise self.error("the keyring is locked")

    def delete_password(self, service: str, username: str) -> None:
        raise self.error("the keyring is locked")
