"""A crash-safe record of finished samples, so an interrupted run resumes without losing or repeating work.

The journal is one SQLite file in WAL mode with ``synchronous=FULL``: :meth:`Journal.record`
returns only once the sample is committed to disk, and a caller counts a sample as finished only
after that, so a ``kill -9`` at any point loses nothing that was counted. Samples are keyed by
``(row_index, sample_index)``; recording a key again replaces it (a retried sample), so no sample
is ever counted twice.

A journal belongs to one configuration, identified by a fingerprint of what determines the results
(agent source, eval functions, model, flags, dataset content — the caller decides, see
:func:`fingerprint` and :func:`file_digest`). Opening it with another fingerprint raises
:class:`JournalMismatchError` naming what changed; ``fresh=True`` moves the old file aside as a
backup and starts over.

Samples that ended in an infrastructure failure (``infra_error``, ``timeout``) are kept for the
record but are not *finished*: a resumed run runs them again. ``retry_failed=True`` also reruns
``model_error`` samples.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osmosis_ai.evaluation.errors import EvaluationError
from osmosis_ai.evaluation.outcome import Outcome

SCHEMA_VERSION = "1"
RETRIED_WITH_RETRY_FAILED = frozenset({Outcome.MODEL_ERROR})

Key = tuple[int, int]


class JournalError(EvaluationError):
    """The journal file cannot be opened or written."""


class JournalMismatchError(JournalError):
    """The journal was made for another configuration; ``changed`` names the parts that differ."""

    def __init__(self, message: str, *, changed: list[str]) -> None:
        super().__init__(message)
        self.changed = changed


def fingerprint(description: Mapping[str, Any]) -> str:
    """A stable digest of ``description`` (JSON-serialisable; key order does not matter)."""
    canonical = json.dumps(description, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def file_digest(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """SHA-256 of a file's content, read in chunks (a large dataset is never held whole)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class SampleRecord:
    """One finished sample: how it ended and what the run needs to report it (``data``, JSON)."""

    row_index: int
    sample_index: int
    outcome: Outcome
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> Key:
        return (self.row_index, self.sample_index)


class Journal:
    """Open with :meth:`open`; one journal per run, usable from one event loop and its worker thread."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._connection = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | Path, description: Mapping[str, Any], *, fresh: bool = False) -> Journal:
        """The journal at ``path`` for the configuration ``description``, created if missing.

        Raises :class:`JournalMismatchError` when it exists for another configuration (unless
        ``fresh``, which first renames the old file to ``<name>.<unix time>.bak``).
        """
        file = Path(path)
        if fresh and file.exists():
            backup = file.with_name(f"{file.name}.{int(time.time())}.bak")
            try:
                with sqlite3.connect(file) as old:  # fold the WAL into the file before moving it
                    old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                old.close()
                file.rename(backup)
                for suffix in ("-wal", "-shm"):
                    file.with_name(file.name + suffix).unlink(missing_ok=True)
            except (OSError, sqlite3.Error) as exc:
                raise JournalError(f"cannot move the old journal {file} aside: {exc}") from exc
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(file, check_same_thread=False, isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS samples (row_index INTEGER NOT NULL, sample_index INTEGER NOT NULL,"
                " outcome TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (row_index, sample_index))"
            )
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(f"cannot open the journal {file}: {exc}") from exc
        journal = cls(file, connection)
        journal._claim(dict(description))
        return journal

    def _claim(self, description: dict[str, Any]) -> None:
        stored = dict(self._connection.execute("SELECT key, value FROM meta").fetchall())
        wanted = fingerprint(description)
        if not stored:
            with self._lock:
                self._connection.execute("BEGIN IMMEDIATE")
                self._connection.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [
                        ("schema", SCHEMA_VERSION),
                        ("fingerprint", wanted),
                        ("description", json.dumps(description, sort_keys=True, default=str)),
                    ],
                )
                self._connection.execute("COMMIT")
            return
        if stored.get("fingerprint") == wanted:
            return
        before = json.loads(stored.get("description", "{}"))
        after = json.loads(json.dumps(description, sort_keys=True, default=str))
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)) or [
            "schema"
        ]
        self._connection.close()
        raise JournalMismatchError(
            f"the journal {self.path} belongs to another run: {', '.join(changed)} changed since it was "
            "written; start over with a fresh journal (the old one is kept as a backup)",
            changed=changed,
        )

    # -- reading --------------------------------------------------------------------------------------

    def records(self) -> dict[Key, SampleRecord]:
        """Every recorded sample, finished or not."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT row_index, sample_index, outcome, data FROM samples ORDER BY row_index, sample_index"
            ).fetchall()
        return {(r, s): SampleRecord(r, s, Outcome(o), json.loads(d)) for r, s, o, d in rows}

    def to_run(self, keys: Iterable[Key], *, retry_failed: bool = False) -> list[Key]:
        """The ``keys`` still to run: not recorded, or recorded with an outcome that is run again."""
        recorded = {key: record.outcome for key, record in self.records().items()}
        again = {o for o in Outcome if o.is_infrastructure}
        if retry_failed:
            again |= RETRIED_WITH_RETRY_FAILED
        return [key for key in keys if key not in recorded or recorded[key] in again]

    # -- writing --------------------------------------------------------------------------------------

    def record(self, sample: SampleRecord) -> None:
        """Commit ``sample`` durably; when this returns, the sample survives a crash."""
        data = json.dumps(sample.data, sort_keys=True, default=str)
        try:
            with self._lock:
                self._connection.execute(
                    "INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?)",
                    (sample.row_index, sample.sample_index, sample.outcome.value, data),
                )
        except sqlite3.Error as exc:
            raise JournalError(f"cannot write to the journal {self.path}: {exc}") from exc

    async def arecord(self, sample: SampleRecord) -> None:
        """:meth:`record` in a worker thread, so the disk sync does not stall the event loop."""
        await asyncio.to_thread(self.record, sample)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
