"""The outbox: terminal callbacks committed to SQLite before they are sent, until TrainGate acknowledges them.

One row per rollout (primary key: the dedup key, ``idempotency_key`` or ``rollout_id``) holds the
encoded ``RolloutResponse`` and where to send it (``server_url`` and the callback key). A row is
written when the rollout's outcome exists and deleted when TrainGate answers 2xx (or 409: it already
has the rollout) or rejects it with another 4xx; what is left is what TrainGate has not acknowledged:
``/health``'s ``pending_deliveries``, re-sent when a server restarts on the same file, and the stored
result a duplicate init re-sends.

Durability: the file is in WAL mode with ``synchronous=NORMAL``, so a committed row survives the
process being killed (SIGKILL, OOM); a power loss may lose the last commits. ``path=None`` (or
``":memory:"``) keeps the rows in memory: results still wait out a trainer outage and duplicate inits
still re-send them, but a killed process loses them. The file holds callback keys, so it is created
readable by its owner only.

Writes run on the event loop: a commit to the WAL is a write to the page cache without ``fsync``
(tens of microseconds; measured in docs/design/rollout-server.md), cheaper than a thread hop. SQLite checkpoints
the WAL into the file itself, every 1,000 pages, in the commit that crosses the mark. An acknowledged
row is deleted at once, in its own commit.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

MEMORY = ":memory:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    key TEXT PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    server_url TEXT NOT NULL,
    api_key TEXT,
    body BLOB NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""


@dataclass(frozen=True)
class Delivery:
    """One terminal callback: its dedup key, where it goes, its encoded ``RolloutResponse``, and when
    it was committed (``time.time()``)."""

    key: str
    rollout_id: str
    server_url: str
    api_key: str | None
    body: bytes
    created: float = field(default_factory=time.time)


def _create_private(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


class Outbox:
    """The unacknowledged terminal callbacks of one server (see the module docstring).

    Raises ``sqlite3.Error`` / ``OSError`` from the constructor when the file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = MEMORY if path is None or str(path) == MEMORY else str(Path(path).expanduser())
        self.durable = self.path != MEMORY
        if self.durable:
            _create_private(Path(self.path))
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        if self.durable:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._keys = self._stored_keys()  # so that asking for a key not stored costs no query

    @property
    def pending(self) -> int:
        """Rows not acknowledged yet."""
        return len(self._keys)

    def put(self, delivery: Delivery) -> None:
        """Commit ``delivery`` (replacing an older one of the same key)."""
        key = delivery.key
        row = (
            key,
            delivery.rollout_id,
            delivery.server_url,
            delivery.api_key,
            delivery.body,
            delivery.created,
        )
        try:
            self._db.execute("INSERT INTO outbox VALUES (?, ?, ?, ?, ?, ?)", row)
        except sqlite3.IntegrityError:  # a rollout started afresh after a duplicate init
            self._db.execute(
                "UPDATE outbox SET rollout_id = ?, server_url = ?, api_key = ?, body = ?, created = ? "
                "WHERE key = ?",
                (*row[1:], key),
            )
        else:
            self._keys.add(key)

    def remove(self, key: str) -> None:
        """Delete the row of ``key`` (acknowledged or rejected)."""
        if key not in self._keys:
            return
        self._db.execute("DELETE FROM outbox WHERE key = ?", (key,))
        self._keys.discard(key)

    def get(self, key: str) -> Delivery | None:
        """The unacknowledged callback of ``key``, if any."""
        if key not in self._keys:
            return None
        row = self._db.execute("SELECT * FROM outbox WHERE key = ?", (key,)).fetchone()
        return None if row is None else Delivery(*row)

    def all(self) -> list[Delivery]:
        """Every unacknowledged callback, oldest first."""
        return [Delivery(*row) for row in self._db.execute("SELECT * FROM outbox ORDER BY created")]

    def prune(self, older_than_seconds: float) -> int:
        """Drop rows older than ``older_than_seconds`` (TrainGate stopped waiting for them); returns how many."""
        before = self._db.total_changes
        self._db.execute("DELETE FROM outbox WHERE created < ?", (time.time() - older_than_seconds,))
        dropped = self._db.total_changes - before
        self._keys = self._stored_keys()
        return dropped

    def _stored_keys(self) -> set[str]:
        return {key for (key,) in self._db.execute("SELECT key FROM outbox")}

    def close(self) -> None:
        self._db.close()
