"""A crash-safe record of finished samples, so an interrupted run resumes without losing or repeating work.

The journal is one SQLite file in WAL mode with ``synchronous=FULL``: :meth:`Journal.record`
returns only once the sample is committed to disk, and a caller counts a sample as finished only
after that, so a ``kill -9`` at any point loses nothing that was counted. Samples are keyed by
``(row_index, sample_index)`` within a model tag (``primary``, or ``baseline`` for a second model
run over the same rows); recording a key again replaces it (a retried sample), so no sample is
ever counted twice. :meth:`Journal.arecord` commits the samples that finish together in one
transaction (one disk sync for many samples), each caller released only once its sample is in.

With ``samples_path``, the final messages of each recorded sample are appended there as one JSON
line ``{row_index, run_index, model_tag, messages}`` before the sample is committed: a crash may
leave a line whose sample is run again (readers keep the last line per key), never a committed
sample without its line.

A journal belongs to one configuration, identified by a fingerprint of what determines the results
(agent source, eval functions, model, flags, dataset content — the caller decides, see
:func:`fingerprint` and :func:`file_digest`). Opening it with another fingerprint raises
:class:`JournalMismatchError` naming what changed; ``fresh=True`` moves the old file aside as a
backup and starts over. A journal with no sample in it holds nothing to lose, so it is simply
claimed for the new configuration (a run that failed before its first sample, say at its preflight,
never traps the corrected command).

One run at a time: :meth:`Journal.open` takes an exclusive lock (``flock`` on ``<journal>.lock``,
released when the journal is closed or the process ends, however it ends), and a second run on the
same journal is refused with :class:`JournalLockedError` naming the process that holds it.

Samples that ended in an infrastructure failure (``infra_error``, ``timeout``) are kept for the
record but are not *finished*: a resumed run runs them again. ``retry_failed=True`` also reruns
``model_error`` samples.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osmosis_ai.errors import EvaluationError
from osmosis_ai.outcome import Outcome

SCHEMA_VERSION = "2"
LOGGED_TO = "logged_to"  # the meta key of note_logged
RETRIED_WITH_RETRY_FAILED = frozenset({Outcome.MODEL_ERROR, Outcome.REWARD_TIMEOUT, Outcome.REWARD_CRASH})
PRIMARY = "primary"
BASELINE = "baseline"
IN_PROGRESS = "in_progress"
COMPLETED = "completed"

Key = tuple[int, int]


class JournalError(EvaluationError):
    """The journal file cannot be opened or written."""


class JournalCorruptError(JournalError):
    """A journal's content cannot be read (not an SQLite file, damaged pages, tables or values that
    are not a journal's). :meth:`Journal.open` sets such a file aside rather than raise this; it
    reaches callers only for a sample found unreadable later."""


class JournalMismatchError(JournalError):
    """The journal was made for another configuration; ``changed`` names the parts that differ."""

    def __init__(self, message: str, *, changed: list[str], path: Path | None = None) -> None:
        super().__init__(message)
        self.changed = changed
        self.path = path


class JournalLockedError(JournalError):
    """Another run holds the journal; ``holder`` describes it (process id, host, command) when known."""

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


def runs_again(outcome: Outcome, *, retry_failed: bool = False) -> bool:
    """Whether a sample recorded with ``outcome`` is run again on resume: infrastructure failures
    always, model errors with ``retry_failed``."""
    return outcome.is_infrastructure or (retry_failed and outcome in RETRIED_WITH_RETRY_FAILED)


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
    model_tag: str = PRIMARY
    messages: list[dict[str, Any]] | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> Key:
        return (self.row_index, self.sample_index)


@dataclass(frozen=True)
class SetAside:
    """A journal file :meth:`Journal.open` could not read, renamed to ``kept`` (with its WAL file,
    and the samples file) before starting over; ``reason`` says what was wrong with it."""

    path: Path
    kept: Path
    reason: str

    def describe(self) -> str:
        return (
            f"the journal {self.path} could not be read ({self.reason}); it is kept as {self.kept} "
            "and the run starts over"
        )


@dataclass(frozen=True)
class JournalInfo:
    """What ``osmosis eval cache ls`` shows of a journal, read without claiming it."""

    path: Path
    labels: dict[str, Any]
    status: str
    created_at: float
    runs: int


@dataclass(frozen=True)
class JournalContents:
    """A whole journal as :meth:`Journal.read` found it: its samples per model tag, in key order."""

    path: Path
    labels: dict[str, Any]
    description: dict[str, Any]
    status: str
    records: dict[str, list[SampleRecord]]


class Journal:
    """Open with :meth:`open`; one journal per run, usable from one event loop and its worker thread."""

    def __init__(self, path: Path, connection: sqlite3.Connection, samples_path: Path | None = None) -> None:
        self.path = path
        self.samples_path = samples_path
        self.set_aside: SetAside | None = None
        self._connection = connection
        self._lock = threading.Lock()
        self._pending: list[tuple[SampleRecord, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._lock_fd: int | None = None
        self.created = False
        """Whether :meth:`open` created the file (none was there, or it set the old one aside)."""

    @classmethod
    def open(
        cls,
        path: str | Path,
        description: Mapping[str, Any],
        *,
        fresh: bool = False,
        labels: Mapping[str, Any] | None = None,
        samples_path: str | Path | None = None,
    ) -> Journal:
        """The journal at ``path`` for the configuration ``description``, created if missing.

        Raises :class:`JournalMismatchError` when it exists for another configuration (unless
        ``fresh``, which first renames the old file, and its samples file, to ``<name>.<unix time>.bak``).
        A file that is not a readable journal (see :class:`JournalCorruptError`) is renamed to
        ``<name>.<unix time>.corrupt`` and a new journal started; :attr:`set_aside` says so. Before
        returning, a write proves the journal (and the samples file) can take the run's samples.
        ``labels`` (JSON) are stored for listings only; they are not part of the fingerprint.
        """
        file = Path(path)
        samples = Path(samples_path) if samples_path is not None else None
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JournalError(f"cannot open the journal {file}: {exc}") from exc
        lock = _lock(file)
        try:
            return cls._open_locked(file, description, fresh=fresh, labels=labels, samples=samples, lock=lock)
        except BaseException:
            os.close(lock)
            raise

    @classmethod
    def _open_locked(
        cls,
        file: Path,
        description: Mapping[str, Any],
        *,
        fresh: bool,
        labels: Mapping[str, Any] | None,
        samples: Path | None,
        lock: int,
    ) -> Journal:
        if fresh and file.exists():
            _move_aside(file, samples, "bak", fold=True)
        created = not file.exists()
        try:
            journal = cls._open(file, samples, dict(description), dict(labels or {}))
        except JournalCorruptError as exc:
            kept = _move_aside(file, samples, "corrupt", fold=False)
            journal = cls._open(file, samples, dict(description), dict(labels or {}))
            journal.set_aside = SetAside(file, kept, str(exc))
            created = True
        journal._lock_fd = lock
        journal.created = created
        return journal

    @classmethod
    def _open(
        cls, file: Path, samples: Path | None, description: dict[str, Any], labels: dict[str, Any]
    ) -> Journal:
        existed = file.exists() and file.stat().st_size > 0
        try:
            connection = sqlite3.connect(file, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(f"cannot open the journal {file}: {exc}") from exc
        journal = cls(file, connection, samples)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            if existed:
                journal._check_structure()
            connection.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS samples (row_index INTEGER NOT NULL, sample_index INTEGER NOT NULL,"
                " model_tag TEXT NOT NULL, outcome TEXT NOT NULL, data TEXT NOT NULL,"
                " PRIMARY KEY (row_index, sample_index, model_tag))"
            )
            journal._claim(description, labels)
            journal._check_outcomes()
            journal.mark(IN_PROGRESS)  # a write now: a read-only journal fails before any paid work
            journal._open_samples()
        except sqlite3.DatabaseError as exc:
            connection.close()
            if _is_corrupt(exc):
                raise JournalCorruptError(str(exc)) from exc
            raise JournalError(f"cannot open the journal {file}: {exc}") from exc
        except OSError as exc:
            connection.close()
            raise JournalError(f"cannot write the samples file {samples}: {exc.strerror or exc}") from exc
        except JournalError:
            connection.close()
            raise
        return journal

    def _check_structure(self) -> None:
        """Raise :class:`JournalCorruptError` unless the file's pages are sound and its tables are a
        journal's (an SQLite file holding other tables is not taken over)."""
        problems = [row[0] for row in self._connection.execute("PRAGMA quick_check(1)").fetchall()]
        if problems != ["ok"]:
            raise JournalCorruptError(f"damaged database: {' '.join(str(problems[0]).split())}")
        names = [
            row[0] for row in self._connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        tables = {
            name: [
                column[1]
                for column in self._connection.execute("SELECT * FROM pragma_table_info(?)", (name,))
            ]
            for name in names
        }
        if tables and tables != {"meta": _META_COLUMNS, "samples": _SAMPLE_COLUMNS}:
            found = ", ".join(f"{name}({', '.join(columns)})" for name, columns in sorted(tables.items()))
            raise JournalCorruptError(f"its tables are not a journal's: {found}")

    def _check_outcomes(self) -> None:
        known = [outcome.value for outcome in Outcome]
        marks = ", ".join("?" * len(known))
        unknown = self._connection.execute(
            f"SELECT row_index, sample_index, outcome FROM samples WHERE outcome NOT IN ({marks}) LIMIT 1",
            known,
        ).fetchone()
        if unknown is not None:
            row, sample, outcome = unknown
            raise JournalCorruptError(f"row {row}, sample {sample} has the unknown outcome {outcome!r}")

    def _open_samples(self) -> None:
        if self.samples_path is None:
            return
        # Append mode creates the file (proving it writable) and, after a crash cut the last line
        # short, ends that line so the next one is not glued to it.
        with self.samples_path.open("ab+") as handle:
            if handle.tell() > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")

    def _claim(self, description: dict[str, Any], labels: dict[str, Any]) -> None:
        stored = dict(self._connection.execute("SELECT key, value FROM meta").fetchall())
        wanted = fingerprint(description)
        if stored and stored.get("fingerprint") != wanted and self.is_empty():
            stored = {}  # nothing recorded under the old configuration: nothing to keep
        if not stored:
            with self._lock:
                self._connection.execute("BEGIN IMMEDIATE")
                self._connection.execute("DELETE FROM meta")
                self._connection.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [
                        ("schema", SCHEMA_VERSION),
                        ("fingerprint", wanted),
                        ("description", json.dumps(description, sort_keys=True, default=str)),
                        ("labels", json.dumps(labels, sort_keys=True, default=str)),
                        ("created_at", repr(time.time())),
                        ("status", IN_PROGRESS),
                    ],
                )
                self._connection.execute("COMMIT")
            return
        if stored.get("schema") == SCHEMA_VERSION and stored.get("fingerprint") == wanted:
            return
        try:
            before = json.loads(stored.get("description", "{}"))
        except ValueError as exc:
            raise JournalCorruptError(f"its description is not JSON ({exc})") from None
        if not isinstance(before, dict):
            raise JournalCorruptError("its description is not a JSON object")
        after = json.loads(json.dumps(description, sort_keys=True, default=str))
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if stored.get("schema") != SCHEMA_VERSION:
            changed = ["schema", *changed]
        self._connection.close()  # (the lock is released by open, which is raising this)
        raise JournalMismatchError(
            f"the journal {self.path} belongs to another run: {', '.join(changed)} changed since it was "
            "written; start over with a fresh journal (the old one is kept as a backup)",
            changed=changed,
            path=self.path,
        )

    def is_empty(self) -> bool:
        """Whether no sample has been committed."""
        with self._lock:
            return self._connection.execute("SELECT 1 FROM samples LIMIT 1").fetchone() is None

    @staticmethod
    def inspect(path: str | Path) -> JournalInfo | None:
        """A journal's labels, status and number of recorded samples, read-only; None if it is not one."""
        file = Path(path)
        try:
            with contextlib.closing(sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)) as db:
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                runs = db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
        except sqlite3.Error:
            return None
        if "fingerprint" not in meta:
            return None
        try:
            labels = json.loads(meta.get("labels", "{}"))
            created_at = float(meta.get("created_at", "0") or 0)
        except ValueError:
            return None
        return JournalInfo(
            path=file,
            labels=labels if isinstance(labels, dict) else {},
            status=meta.get("status", IN_PROGRESS),
            created_at=created_at,
            runs=int(runs),
        )

    @staticmethod
    def read(path: str | Path) -> JournalContents | None:
        """Every sample a journal recorded, with its labels and description, read-only and without
        its lock (a run may be writing it); None if the file is not a journal. Raises
        :class:`JournalCorruptError` for a journal whose content cannot be read."""
        file = Path(path)
        try:
            with contextlib.closing(sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)) as db:
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                if "fingerprint" not in meta:
                    return None
                rows = db.execute(
                    "SELECT row_index, sample_index, outcome, data, model_tag FROM samples"
                    " ORDER BY model_tag, row_index, sample_index"
                ).fetchall()
        except sqlite3.Error:
            return None
        try:
            labels, description = (
                json.loads(meta.get("labels", "{}")),
                json.loads(meta.get("description", "{}")),
            )
            records: dict[str, list[SampleRecord]] = {}
            for row, sample, outcome, data, tag in rows:
                found = json.loads(data)
                if not isinstance(found, dict):
                    raise ValueError(f"row {row}, sample {sample} is not a JSON object")
                records.setdefault(tag, []).append(SampleRecord(row, sample, Outcome(outcome), found, tag))
        except (ValueError, TypeError) as exc:
            raise JournalCorruptError(f"the journal {file} cannot be read ({exc})") from None
        return JournalContents(
            path=file,
            labels=labels if isinstance(labels, dict) else {},
            description=description if isinstance(description, dict) else {},
            status=meta.get("status", IN_PROGRESS),
            records=records,
        )

    # -- reading --------------------------------------------------------------------------------------

    def records(self, model_tag: str = PRIMARY) -> dict[Key, SampleRecord]:
        """Every recorded sample of ``model_tag``, finished or not."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT row_index, sample_index, outcome, data FROM samples WHERE model_tag = ?"
                " ORDER BY row_index, sample_index",
                (model_tag,),
            ).fetchall()
        return {(r, s): self._record(r, s, o, d, model_tag) for r, s, o, d in rows}

    def _record(self, row: int, sample: int, outcome: str, data: str, model_tag: str) -> SampleRecord:
        try:
            return SampleRecord(row, sample, Outcome(outcome), json.loads(data), model_tag)
        except ValueError as exc:  # edited by hand or damaged since it was opened
            raise JournalCorruptError(
                f"the journal {self.path} cannot be read at row {row}, sample {sample} ({exc}); "
                "run again with --fresh to set it aside and start over"
            ) from None

    def outcomes(
        self, model_tag: str = PRIMARY, *, after: Key | None = None, limit: int = -1
    ) -> list[tuple[Key, Outcome]]:
        """The recorded keys of ``model_tag`` and their outcomes (no data), in key order: the first
        ``limit`` (all when negative) after ``after``, so a long journal can be read a page at a time."""
        with self._lock:
            return _outcomes(self._connection, model_tag, after, limit)

    def reader(self) -> sqlite3.Connection:
        """A read-only connection of its own: in WAL mode it reads while a commit is under way,
        where the shared connection would wait for the commit's disk sync."""
        try:
            return sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read the journal {self.path}: {exc}") from exc

    def iter_records(
        self, model_tag: str = PRIMARY, *, start: Key = (0, 0), stop: Key | None = None, page: int = 64
    ) -> Iterator[SampleRecord]:
        """The recorded samples of ``model_tag`` with ``start <= key < stop``, in key order, read
        ``page`` at a time (records can be large: only one page is held)."""
        after: Key | None = None
        while True:
            lower = (
                ("(row_index, sample_index) > (?, ?)", after)
                if after
                else ("(row_index, sample_index) >= (?, ?)", start)
            )
            upper = (" AND (row_index, sample_index) < (?, ?)", stop) if stop is not None else ("", ())
            with self._lock:
                rows = self._connection.execute(
                    f"SELECT row_index, sample_index, outcome, data FROM samples WHERE model_tag = ?"
                    f" AND {lower[0]}{upper[0]} ORDER BY row_index, sample_index LIMIT ?",
                    (model_tag, *lower[1], *upper[1], page),
                ).fetchall()
            for r, s, o, d in rows:
                yield self._record(r, s, o, d, model_tag)
            if len(rows) < page:
                return
            after = (rows[-1][0], rows[-1][1])

    def to_run(
        self, keys: Iterable[Key], *, retry_failed: bool = False, model_tag: str = PRIMARY
    ) -> list[Key]:
        """The ``keys`` still to run: not recorded, or recorded with an outcome that is run again."""
        recorded = dict(self.outcomes(model_tag))
        return [
            key for key in keys if key not in recorded or runs_again(recorded[key], retry_failed=retry_failed)
        ]

    def finished_in_order(
        self, *, retry_failed: bool = False, model_tag: str = PRIMARY
    ) -> Callable[[int, int], bool]:
        """A predicate ``finished(row, sample)`` for keys asked in ascending order (a streamed
        dataset): whether the key is recorded with an outcome that is not run again."""
        return FinishedKeys(self, retry_failed=retry_failed, model_tag=model_tag)

    @property
    def status(self) -> str:
        with self._lock:
            row = self._connection.execute("SELECT value FROM meta WHERE key = 'status'").fetchone()
        return str(row[0]) if row else IN_PROGRESS

    # -- writing --------------------------------------------------------------------------------------

    def record(self, sample: SampleRecord) -> None:
        """Commit ``sample`` durably; when this returns, the sample survives a crash."""
        self.record_many([sample])

    def record_many(self, samples: list[SampleRecord]) -> None:
        """Commit ``samples`` in one transaction (their sample lines first, see the module docstring)."""
        rows = [
            (
                s.row_index,
                s.sample_index,
                s.model_tag,
                s.outcome.value,
                json.dumps(s.data, sort_keys=True, default=str),
            )
            for s in samples
        ]
        try:
            self._append_samples(samples)
            with self._lock:
                self._connection.execute("BEGIN IMMEDIATE")
                try:
                    self._connection.executemany(
                        "INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?, ?)", rows
                    )
                    self._connection.execute("UPDATE meta SET value = ? WHERE key = 'status'", (IN_PROGRESS,))
                except BaseException:
                    self._connection.execute("ROLLBACK")
                    raise
                self._connection.execute("COMMIT")
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(f"cannot write to the journal {self.path}: {exc}") from exc

    def _append_samples(self, samples: list[SampleRecord]) -> None:
        if self.samples_path is None:
            return
        lines = [
            json.dumps(
                {
                    "row_index": s.row_index,
                    "run_index": s.sample_index,
                    "model_tag": s.model_tag,
                    "messages": s.messages,
                },
                ensure_ascii=False,
                default=str,
            )
            for s in samples
            if s.messages is not None
        ]
        if lines:
            with self.samples_path.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
                handle.flush()
                os.fsync(handle.fileno())

    async def arecord(self, sample: SampleRecord) -> None:
        """:meth:`record` off the event loop, grouped with the samples that finish meanwhile."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((sample, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_pending())
        await future

    async def _write_pending(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self.record_many, [sample for sample, _ in batch])
            except BaseException as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
            else:
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)

    @staticmethod
    def logged_to(path: str | Path) -> frozenset[str]:
        """The experiment trackers the run's results were sent to (:meth:`note_logged`), read-only."""
        try:
            with contextlib.closing(
                sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
            ) as db:
                found = db.execute("SELECT value FROM meta WHERE key = ?", (LOGGED_TO,)).fetchone()
            tools = json.loads(found[0]) if found else []
        except (sqlite3.Error, ValueError):
            return frozenset()
        return frozenset(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else frozenset()

    @staticmethod
    def note_logged(path: str | Path, tools: Iterable[str]) -> None:
        """Remember that the run's results were sent to ``tools``, so a rerun with nothing left to run
        sends them no second copy. A journal another run holds, or one that cannot be written, is
        left as it is: the rerun then sends its copy, which is all this note saves."""
        file = Path(path)
        try:
            lock = _lock(file)
        except JournalError:
            return
        try:
            with contextlib.closing(sqlite3.connect(file)) as db, db:
                value = json.dumps(sorted(Journal.logged_to(file) | set(tools)))
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (LOGGED_TO, value))
        except sqlite3.Error:
            pass
        finally:
            os.close(lock)

    def mark(self, status: str) -> None:
        """Record the run's status (``in_progress`` or ``completed``) for listings."""
        with self._lock:
            self._connection.execute("UPDATE meta SET value = ? WHERE key = 'status'", (status,))

    def close(self) -> None:
        """Close the journal and release its lock. Idempotent."""
        with self._lock:
            self._connection.close()
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            os.close(fd)

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite said the file is not a database or is damaged (not busy, locked or read-only)."""
    name = str(getattr(exc, "sqlite_errorname", ""))  # Python 3.11+; the messages are SQLite's own
    return name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or str(exc) in _CORRUPT_MESSAGES


_CORRUPT_MESSAGES = ("file is not a database", "database disk image is malformed")
_META_COLUMNS = ["key", "value"]
_SAMPLE_COLUMNS = ["row_index", "sample_index", "model_tag", "outcome", "data"]


def _free_name(file: Path, tag: str) -> Path:
    """``<name>.<unix time>.<tag>``, with a counter when that name is taken (two in one second)."""
    stamp = int(time.time())
    kept = file.with_name(f"{file.name}.{stamp}.{tag}")
    count = 1
    while kept.exists() or kept.is_symlink():
        count += 1
        kept = file.with_name(f"{file.name}.{stamp}-{count}.{tag}")
    return kept


def _move_aside(file: Path, samples: Path | None, tag: str, *, fold: bool) -> Path:
    """Rename ``file`` (its WAL beside it) and ``samples`` to ``<name>.<unix time>.<tag>``; return the new name.

    A journal set aside for starting over (``fold``) has its WAL folded in first, when it can be read;
    otherwise the file is left exactly as it is and its WAL renamed with it, so SQLite still finds
    it next to the kept file.
    """
    kept = _free_name(file, tag)
    try:
        if fold:
            with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(file)) as old:
                old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        file.rename(kept)
        wal = file.with_name(file.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            wal.rename(kept.with_name(kept.name + "-wal"))
        for suffix in ("-wal", "-shm"):
            file.with_name(file.name + suffix).unlink(missing_ok=True)
        if samples is not None and samples.exists():
            samples.rename(_free_name(samples, tag))
    except OSError as exc:
        raise JournalError(f"cannot move the old journal {file} aside: {exc.strerror or exc}") from exc
    return kept


def _lock(file: Path) -> int:
    """Take ``<file>.lock`` exclusively, write who holds it, and return its descriptor (closing it
    releases the lock; so does the process ending). :class:`JournalLockedError` when another holds it."""
    path = file.with_name(file.name + ".lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise JournalError(f"cannot lock the journal {file}: {exc.strerror or exc}") from exc
    try:
        import fcntl
    except ImportError:  # not POSIX: no advisory locks to take
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or None
        os.close(fd)
        who = f" ({holder})" if holder else ""
        raise JournalLockedError(
            f"the journal {file} is in use by another run{who}; wait for it to finish, or give this "
            "run a journal of its own",
            holder=holder,
        ) from None
    from osmosis_ai._http import redact_command  # the holder line is read by anyone who can read the file

    argv = redact_command(sys.argv)
    command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))[:200]
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}: {command}".encode(), 0)
    return fd


def _outcomes(
    connection: sqlite3.Connection, model_tag: str, after: Key | None, limit: int
) -> list[tuple[Key, Outcome]]:
    where, bound = ("AND (row_index, sample_index) > (?, ?)", after) if after is not None else ("", ())
    rows = connection.execute(
        f"SELECT row_index, sample_index, outcome FROM samples WHERE model_tag = ? {where}"
        " ORDER BY row_index, sample_index LIMIT ?",
        (model_tag, *bound, limit),
    ).fetchall()
    return [((r, s), Outcome(o)) for r, s, o in rows]


class FinishedKeys:
    """Answers "is this key finished?" for keys asked in ascending order, reading the journal's
    outcomes a page at a time alongside, so a run's whole key set is never held.

    It is asked on the event loop while the run commits samples, so it reads through a connection
    of its own (:meth:`Journal.reader`) and never waits for a commit."""

    def __init__(self, journal: Journal, *, retry_failed: bool, model_tag: str, page: int = 1024) -> None:
        self._reader = journal.reader()
        self.retry_failed = retry_failed
        self.model_tag = model_tag
        self.page = page
        self._buffered: deque[tuple[Key, Outcome]] = deque()
        self._last: Key | None = None
        self._exhausted = False

    def __call__(self, row: int, sample: int) -> bool:
        key = (row, sample)
        while True:
            while self._buffered and self._buffered[0][0] < key:
                self._buffered.popleft()
            if self._buffered or self._exhausted:
                break
            fetched = _outcomes(self._reader, self.model_tag, self._last, self.page)
            self._exhausted = len(fetched) < self.page
            if self._exhausted:
                self._reader.close()
            if fetched:
                self._last = fetched[-1][0]
            self._buffered.extend(fetched)
        if not self._buffered or self._buffered[0][0] != key:
            return False
        return not runs_again(self._buffered[0][1], retry_failed=self.retry_failed)


def read_samples(path: str | Path) -> list[dict[str, Any]]:
    """The sample lines of ``path``, the last line of each ``(row, run, tag)`` kept, in key order."""
    kept: dict[tuple[int, int, str], dict[str, Any]] = {}
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a crash
                continue
            kept[(sample["row_index"], sample["run_index"], sample["model_tag"])] = sample
    return [kept[key] for key in sorted(kept)]
