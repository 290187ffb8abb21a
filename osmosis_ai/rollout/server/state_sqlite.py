"""The shared state of the worker processes of one host (``serve --workers N``): an SQLite file."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.state_shared import (
    CANCELLED_QUEUED,
    CANCELLED_RUNNING,
    DEFAULT_LEASE_SECONDS,
    NOT_FOUND,
    Claim,
    StoredRollout,
    owner_id,
)

T = TypeVar("T")

# ``created``: when the claim was made or last renewed (it is dropped ``record_ttl`` later)
_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, rollout_id TEXT NOT NULL, owner TEXT NOT NULL, "
    "body BLOB, created REAL NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, beat REAL NOT NULL) WITHOUT ROWID",
    # the 0.3 wire's rollouts: ``lease`` and ``keep`` (when a finished one is forgotten) are time.time()
    "CREATE TABLE IF NOT EXISTS rollouts03 (id TEXT PRIMARY KEY, digest BLOB NOT NULL, owner TEXT NOT NULL, "
    "status TEXT NOT NULL, result BLOB, lease REAL NOT NULL, keep REAL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS rollouts03_keep ON rollouts03 (keep)",
    # the cancelled ones' dispositions, kept as long as their results, and the counter of cancels
    "CREATE TABLE IF NOT EXISTS cancelled03 (id TEXT PRIMARY KEY, disposition TEXT NOT NULL, "
    "keep REAL NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS cancels03 (one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL)",
)
_BATCH = 500  # ids per statement, well below SQLite's limit on parameters
_ROLLOUT = (
    "SELECT r.digest, r.owner, r.status, r.result, r.lease, o.beat FROM rollouts03 r "
    "LEFT JOIN owners o ON o.owner = r.owner WHERE r.id = ?"
)
_LIVE_CLAIM = (
    "SELECT c.rollout_id, c.body FROM claims c JOIN owners o ON o.owner = c.owner "
    "WHERE c.key = ? AND o.beat >= ?"
)


class SqliteState:
    """Claims in an SQLite file (WAL) shared by the processes of one host.

    Statements run on the event loop, as the outbox's do: each is a short transaction on a local
    file; a writer waits at most ``busy_seconds`` for another process's write lock (held for
    microseconds). Raises :class:`SharedStateUnavailable` from the constructor when the file cannot
    be opened.
    """

    def __init__(
        self,
        path: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        record_ttl_seconds: float = 3600.0,
        owner: str | None = None,
        busy_seconds: float = 5.0,
    ) -> None:
        import sqlite3

        self.where = path
        self.lease_seconds = lease_seconds
        self.record_ttl = record_ttl_seconds
        self.owner = owner or owner_id()
        self._errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
        try:
            directory = os.path.dirname(path)
            if directory and not os.path.isdir(directory):  # a typo makes no directory tree
                raise SharedStateUnavailable(
                    f"cannot open the shared state {path}: the directory {directory} does not exist; "
                    "create it first, or choose another file"
                )
            if path != ":memory:" and not os.path.exists(
                path
            ):  # it holds no secret, but nobody else needs to write it
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._db = sqlite3.connect(
                path, timeout=busy_seconds, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SQLITE_SCHEMA:
                self._db.execute(statement)
            self._beat()
        except self._errors as exc:
            raise SharedStateUnavailable(f"cannot open the shared state {path}: {exc}") from None

    def _run(self, action: Callable[[], T]) -> T:
        try:
            return action()
        except self._errors as exc:
            raise SharedStateUnavailable(f"the shared state {self.where} failed: {exc}") from None

    def _beat(self) -> None:
        self._db.execute("INSERT OR REPLACE INTO owners VALUES (?, ?)", (self.owner, time.time()))

    async def claim(self, key: str, rollout_id: str) -> Claim | None:
        def claim() -> Claim | None:
            db = self._db
            now = time.time()
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(_LIVE_CLAIM, (key, now - self.lease_seconds)).fetchone()
                if row is None:
                    db.execute(
                        "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, NULL, ?)",
                        (key, rollout_id, self.owner, now),
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return None if row is None else Claim(row[0], row[1])

        return self._run(claim)

    async def answered(self, key: str, body: bytes) -> None:
        self._run(
            lambda: self._db.execute(
                "UPDATE claims SET body = ? WHERE key = ? AND owner = ?", (body, key, self.owner)
            )
        )

    async def lookup(self, key: str) -> Claim | None:
        row = self._run(
            lambda: self._db.execute(_LIVE_CLAIM, (key, time.time() - self.lease_seconds)).fetchone()
        )
        return None if row is None else Claim(row[0], row[1])

    async def release(self, key: str) -> None:
        self._run(
            lambda: self._db.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key, self.owner))
        )

    async def adopt(self, keys: Mapping[str, str]) -> None:
        now = time.time()
        rows = [(key, rollout_id, self.owner, b"", now) for key, rollout_id in keys.items()]
        self._run(lambda: self._db.executemany("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)", rows))

    async def heartbeat(self, running: Collection[str] = ()) -> None:
        def beat() -> None:
            db = self._db
            now = time.time()
            db.execute("BEGIN IMMEDIATE")  # one commit for the beat, the renewals and the pruning
            try:
                self._beat()
                db.executemany(
                    "UPDATE claims SET created = ? WHERE key = ? AND owner = ?",
                    [(now, key, self.owner) for key in running],
                )
                stale = now - self.record_ttl
                db.execute("DELETE FROM claims WHERE created < ?", (stale,))
                db.execute("DELETE FROM owners WHERE beat < ?", (stale,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        self._run(beat)

    # -- the 0.3 wire's rollouts (ResultStore) ---------------------------------------------------------

    def _alive(self, owner: str, beat: float | None) -> bool:
        """Whether ``owner`` still runs: it beat within the lease, and its process exists. The
        owners of one file are processes of this host, so a pid that is gone (or is this process
        under another token: a restart in a container, as pid 1 again) is a dead owner at once."""
        if owner == self.owner:
            return True
        if beat is None or beat < time.time() - self.lease_seconds:
            return False
        host, _, rest = owner.partition("/")
        pid, _, _token = rest.partition("/")
        if host != socket.gethostname() or not pid.isdigit():
            return True
        if int(pid) == os.getpid():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except OSError:  # another user's process: it exists
            return True
        return True

    async def admit_rollout(self, rollout_id: str, digest: bytes, lease_until: float) -> bool:
        def admit() -> bool:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO rollouts03 VALUES (?, ?, ?, 'queued', NULL, ?, NULL)",
                (rollout_id, digest, self.owner, lease_until),
            )
            return cursor.rowcount == 1

        return self._run(admit)

    async def stored_rollout(self, rollout_id: str) -> StoredRollout | None:
        row = self._run(lambda: self._db.execute(_ROLLOUT, (rollout_id,)).fetchone())
        if row is None:
            return None
        digest, owner, status, result, lease, beat = row
        return StoredRollout(digest, owner, status, result, lease, self._alive(owner, beat))

    async def progress_rollouts(self, statuses: Mapping[str, str], leases: Mapping[str, float]) -> None:
        def progress() -> None:
            db = self._db
            db.execute("BEGIN IMMEDIATE")  # one commit for all of them
            try:
                db.executemany(
                    "UPDATE rollouts03 SET status = ? WHERE id = ? AND result IS NULL",
                    [(status, rollout_id) for rollout_id, status in statuses.items()],
                )
                db.executemany(
                    "UPDATE rollouts03 SET lease = max(lease, ?) WHERE id = ? AND result IS NULL",
                    [(lease_until, rollout_id) for rollout_id, lease_until in leases.items()],
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        self._run(progress)

    async def finish_rollout(self, rollout_id: str, status: str, result: bytes, keep_seconds: float) -> bytes:
        def finish() -> bytes:  # one statement, its own transaction; read back only when not stored
            stored = self._db.execute(
                "UPDATE rollouts03 SET status = ?, result = ?, keep = ? WHERE id = ? AND result IS NULL",
                (status, result, time.time() + keep_seconds, rollout_id),
            )
            if stored.rowcount == 1:
                return result
            row = self._db.execute("SELECT result FROM rollouts03 WHERE id = ?", (rollout_id,)).fetchone()
            return result if row is None else bytes(row[0])

        return self._run(finish)

    async def dead_rollouts(self) -> list[str]:
        rows = self._run(
            lambda: self._db.execute(
                "SELECT r.id, r.owner, o.beat FROM rollouts03 r LEFT JOIN owners o ON o.owner = r.owner "
                "WHERE r.result IS NULL AND r.owner != ?",
                (self.owner,),
            ).fetchall()
        )
        return [rollout_id for rollout_id, owner, beat in rows if not self._alive(owner, beat)]

    async def prune_rollouts(self) -> None:
        def prune() -> None:
            now = time.time()
            self._db.execute("DELETE FROM rollouts03 WHERE keep < ?", (now,))
            self._db.execute("DELETE FROM cancelled03 WHERE keep < ?", (now,))

        self._run(prune)

    async def cancel_rollout(self, rollout_id: str, result: bytes, keep_seconds: float) -> str:
        def cancel() -> str:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                disposition = self._cancel(rollout_id, result, time.time() + keep_seconds)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return disposition

        return self._run(cancel)

    def _cancel(self, rollout_id: str, result: bytes, keep: float) -> str:
        db = self._db
        before = db.execute("SELECT disposition FROM cancelled03 WHERE id = ?", (rollout_id,)).fetchone()
        if before is not None:
            return str(before[0])
        row = db.execute(_ROLLOUT, (rollout_id,)).fetchone()
        if row is None:
            return NOT_FOUND
        _digest, owner, status, kept, _lease, beat = row
        if kept is not None or not self._alive(owner, beat):
            return NOT_FOUND
        disposition = CANCELLED_QUEUED if status == "queued" else CANCELLED_RUNNING
        db.execute(
            "UPDATE rollouts03 SET status = 'cancelled', result = ?, keep = ? WHERE id = ?",
            (result, keep, rollout_id),
        )
        db.execute("INSERT INTO cancelled03 VALUES (?, ?, ?)", (rollout_id, disposition, keep))
        db.execute("INSERT INTO cancels03 VALUES (1, 1) ON CONFLICT (one) DO UPDATE SET n = n + 1")
        return disposition

    async def cancellable_rollouts(self, prefix: str | None = None) -> list[str]:
        match, args = ("", ()) if prefix is None else (" AND substr(id, 1, ?) = ?", (len(prefix), prefix))
        rows = self._run(
            lambda: self._db.execute(
                f"SELECT id FROM rollouts03 WHERE result IS NULL{match} "
                f"UNION SELECT id FROM cancelled03 WHERE keep >= ?{match}",
                (*args, time.time(), *args),
            ).fetchall()
        )
        return [str(row[0]) for row in rows]

    async def cancels_since(self, seen: int, ids: Collection[str]) -> tuple[int, list[str]]:
        def since() -> tuple[int, list[str]]:
            row = self._db.execute("SELECT n FROM cancels03").fetchone()
            counter = 0 if row is None else int(row[0])
            if counter == seen:
                return counter, []
            wanted, found = list(ids), list[str]()
            for start in range(0, len(wanted), _BATCH):
                batch = wanted[start : start + _BATCH]
                marks = ", ".join("?" * len(batch))
                rows = self._db.execute(f"SELECT id FROM cancelled03 WHERE id IN ({marks})", batch)
                found.extend(str(row[0]) for row in rows)
            return counter, found

        return self._run(since)

    def forget_process(self, pid: int) -> None:
        """Declare every owner of process ``pid`` of this host dead (its supervisor saw it end)."""
        prefix = owner_id(pid).rsplit("/", 1)[0] + "/"
        self._run(lambda: self._db.execute("DELETE FROM owners WHERE substr(owner, 1, ?) = ?",
                                           (len(prefix), prefix)))  # fmt: skip

    async def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._db.execute("DELETE FROM owners WHERE owner = ?", (self.owner,))
        self._db.close()
