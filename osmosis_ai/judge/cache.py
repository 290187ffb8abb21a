"""An opt-in on-disk cache of judgments, so re-scoring the same output costs nothing.

A judgment is keyed by a SHA-256 over everything that decides it: the prompt version, the LiteLLM
model id and API base, the response format, sampling settings and the exact messages (which hold
the rubric, the quoted inputs and the score range). The store is one SQLite file (standard
library, safe across processes) holding at most ``max_entries`` rows: the oldest are evicted.
SQLite calls block, so the async accessors run them in a worker thread.

Only successful verdicts are stored; errors are never cached, so fixing a key and re-running
retries exactly what failed. A store that cannot be opened, read or written (bad directory, not a
database, disk full) never fails a judgment: the judge runs without it and one warning names it.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from osmosis_ai.judge.errors import JudgeInputError, JudgeSettingError

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY,
    created REAL NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS judgments_created ON judgments (created);
"""


def default_cache_path() -> Path:
    """``$OSMOSIS_CACHE_DIR/judge/judgments.sqlite3`` (else under ``$XDG_CACHE_HOME/osmosis`` or ``~/.cache/osmosis``)."""
    root = os.environ.get("OSMOSIS_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(xdg) / "osmosis")
    return Path(root) / "judge" / "judgments.sqlite3"


def judgment_key(parts: dict[str, Any]) -> str:
    """A stable hash of the request ``parts`` (JSON with sorted keys)."""
    encoded = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()


class JudgmentCache:
    """A bounded SQLite store of verdicts, shared safely by threads and processes.

    Args:
        path: the database file (created with its directory on first use); default
            :func:`default_cache_path`.
        max_entries: how many judgments to keep; the oldest are evicted beyond it.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise JudgeSettingError(f"max_entries must be at least 1, got {max_entries}")
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._writes = 0
        self._warned = False

    def _connect(self) -> sqlite3.Connection:
        if self._pid != os.getpid():  # a forked child must not share the parent's SQLite handle
            self._connection, self._pid = None, os.getpid()
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.executescript(_SCHEMA)
            except BaseException:  # not a database, read-only, ...: do not leak the handle
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def warn_unavailable(self, error: BaseException) -> None:
        """Log that this store failed and judging goes on without it: a warning once, then debug lines."""
        if self._warned:
            logger.debug("judgment cache %s failed again: %s", self.path, error)
            return
        self._warned = True
        logger.warning("judgment cache %s is unavailable (%s); judging without it", self.path, error)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored verdict for ``key``, or ``None``."""
        with self._lock:
            row = self._connect().execute("SELECT value FROM judgments WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            logger.warning("ignoring an unreadable judgment-cache entry in %s", self.path)
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key``, evicting the oldest entries beyond ``max_entries``."""
        encoded = json.dumps(value, ensure_ascii=False, default=str)
        with self._lock:
            connection = self._connect()
            connection.execute(
                "INSERT OR REPLACE INTO judgments (key, created, value) VALUES (?, ?, ?)",
                (key, time.time(), encoded),
            )
            self._writes += 1
            if self._writes % 64 == 1:
                self._evict(connection)

    def _evict(self, connection: sqlite3.Connection) -> None:
        (count,) = connection.execute("SELECT COUNT(*) FROM judgments").fetchone()
        if count > self.max_entries:
            connection.execute(
                "DELETE FROM judgments WHERE key IN (SELECT key FROM judgments ORDER BY created LIMIT ?)",
                (count - self.max_entries,),
            )

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._connect().execute("SELECT COUNT(*) FROM judgments").fetchone()
        return int(count)

    async def aget(self, key: str) -> dict[str, Any] | None:
        """:meth:`get` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.get, key)

    async def aput(self, key: str, value: dict[str, Any]) -> None:
        """:meth:`put` in a worker thread."""
        await asyncio.to_thread(self.put, key, value)

    def close(self) -> None:
        """Close the database connection (it reopens on next use)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def resolve_cache(cache: JudgmentCache | str | os.PathLike[str] | bool | None) -> JudgmentCache | None:
    """Accept ``None``/``False`` (no cache), ``True`` (the shared default file), a path, or a cache.

    Anything else raises :class:`JudgeInputError` (a ``TypeError``).
    """
    if cache is None or cache is False:
        return None
    if isinstance(cache, JudgmentCache):
        return cache
    if cache is True:
        return _shared_cache(None)
    if not isinstance(cache, (str, os.PathLike)):
        raise JudgeInputError(
            f"cache must be True, False, None, a path or a JudgmentCache, got {type(cache).__name__}"
        )
    return _shared_cache(str(Path(cache).expanduser()))


SHARED_CACHE_LIMIT = 8
_shared: collections.OrderedDict[str | None, JudgmentCache] = collections.OrderedDict()
_shared_lock = threading.Lock()


def _shared_cache(path: str | None) -> JudgmentCache:
    """One cache object per file, so repeated calls reuse a single connection.

    At most ``SHARED_CACHE_LIMIT`` are kept, least recently used first out; an evicted cache is
    closed (three file descriptors each with WAL) and reopens by itself if someone still holds it.
    """
    with _shared_lock:
        cache = _shared.get(path)
        if cache is None:
            cache = _shared[path] = JudgmentCache(path)
            while len(_shared) > SHARED_CACHE_LIMIT:
                _shared.popitem(last=False)[1].close()
        _shared.move_to_end(path)
        return cache
