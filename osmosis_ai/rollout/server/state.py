"""Per-app bookkeeping of rollouts: who is running, who is queued, who finished recently.

Every accepted init creates one :class:`RolloutRecord` under its dedup key (``idempotency_key`` or,
when that is empty, ``rollout_id`` — one namespace for both, as the protocol defines). A record lives
in ``active`` from acceptance until its task ends, then moves to ``completed`` where it is kept for
``record_ttl`` seconds so retried inits are answered without starting the rollout again.

Memory is bounded by design: a finished record keeps only what a duplicate init needs — the original
``rollout_id`` and a reference to the validated tool list, which agents returning an equal list
share — plus its completion time. ``completed`` is ordered by completion time, so pruning stops at
the first record that is still fresh instead of scanning everything, and it never holds more than
``MAX_COMPLETED_RECORDS`` (the oldest go first, with a warning: duplicates of those would run again,
as after the TTL).

The second half of the module is what several processes serving one agent share: a
:class:`SharedState` of claims (:class:`MemoryState` for one process, :class:`SqliteState` for the
workers of one host, :class:`RedisState` for replicas anywhere; :func:`open_state` picks one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError, RolloutValueError

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutServerSettings
    from osmosis_ai.rollout.core.schemas import InitResponse, OpenAIFunctionToolSchema

logger = logging.getLogger(__name__)

MAX_COMPLETED_RECORDS = 1_000_000

V = TypeVar("V")


class RolloutRecord:
    """One accepted rollout. ``task`` is ``None`` once the rollout has finished (or before it starts)."""

    __slots__ = ("completed_at", "key", "ready", "rollout_id", "task", "tools")

    def __init__(self, key: str, rollout_id: str) -> None:
        self.key = key
        self.rollout_id = rollout_id
        self.tools: list[OpenAIFunctionToolSchema] | None = None  # set once get_tools has answered
        self.task: asyncio.Task[None] | None = None
        self.completed_at = 0.0
        # Created only when a duplicate init arrives while get_tools is still running.
        self.ready: asyncio.Future[None] | None = None


class RecordView(Mapping[str, V], Generic[V]):
    """A live, read-only ``{dedup key: value}`` view of a record table (writes raise ``TypeError``).

    Records whose value is ``None`` (a rollout whose task has not started) are left out.
    """

    __slots__ = ("_records", "_value")

    def __init__(self, records: dict[str, RolloutRecord], value: Callable[[RolloutRecord], V | None]) -> None:
        self._records = records
        self._value = value

    def __getitem__(self, key: str) -> V:
        value = self._value(self._records[key])
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        value = self._value
        return iter([key for key, record in self._records.items() if value(record) is not None])

    def __len__(self) -> int:
        value = self._value
        return sum(value(record) is not None for record in self._records.values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


def _task(record: RolloutRecord) -> asyncio.Task[None] | None:
    return record.task


def _completed_at(record: RolloutRecord) -> float:
    return record.completed_at


def _positive_or_default(value: float | None, default: float) -> float:
    # A non-positive limit is a programming error, not a way to say "unset": that is None.
    if value is None:
        return default
    if value <= 0:
        raise RolloutValueError(f"expected a positive number, got {value!r}")
    return value


class AppState:
    """Rollout records, the concurrency semaphore and the periodic cleanup task of one app.

    ``rollout_tasks`` and ``completed_rollouts`` are live read-only views of the records.
    """

    def __init__(
        self,
        max_concurrent: int | None = None,
        record_ttl_seconds: float | None = None,
        cleanup_interval_seconds: float | None = None,
        settings: RolloutServerSettings | None = None,
        agent_loop_name: str = "default",
        max_completed_records: int = MAX_COMPLETED_RECORDS,
    ) -> None:
        if settings is None:
            from osmosis_ai.rollout.config.settings import get_settings

            settings = get_settings().server
        self.settings = settings
        self.agent_loop_name = agent_loop_name
        self._max_concurrent = int(_positive_or_default(max_concurrent, settings.max_concurrent_rollouts))
        self.record_ttl = _positive_or_default(record_ttl_seconds, settings.record_ttl_seconds)
        self.cleanup_interval = _positive_or_default(
            cleanup_interval_seconds, settings.cleanup_interval_seconds
        )
        self.semaphore = asyncio.Semaphore(self._max_concurrent)
        self.active: dict[str, RolloutRecord] = {}
        self.completed: dict[str, RolloutRecord] = {}
        self.running = 0  # rollouts holding a semaphore slot
        self.max_completed_records = int(_positive_or_default(max_completed_records, MAX_COMPLETED_RECORDS))
        self._evicted = 0
        self._init_futures: dict[str, asyncio.Future[InitResponse]] = {}
        self._cleanup_task: asyncio.Task[None] | None = None
        self._tasks_view = RecordView(self.active, _task)
        self._completed_view = RecordView(self.completed, _completed_at)

    # -- counters -------------------------------------------------------------------------------------

    @property
    def max_concurrent(self) -> int:
        return self._max_concurrent

    @property
    def active_count(self) -> int:
        """Accepted rollouts not finished yet, queued ones included (``/health``'s ``active_rollouts``)."""
        return len(self.active)

    @property
    def queued_count(self) -> int:
        """Accepted rollouts waiting for a concurrency slot."""
        return len(self.active) - self.running

    @property
    def completed_count(self) -> int:
        """Finished rollouts still remembered for deduplication (not a lifetime counter)."""
        return len(self.completed)

    @property
    def rollout_tasks(self) -> Mapping[str, asyncio.Task[None]]:
        """``{dedup key: task}`` of the unfinished rollouts (a live, read-only view)."""
        return self._tasks_view

    @property
    def completed_rollouts(self) -> Mapping[str, float]:
        """``{dedup key: monotonic completion time}`` of the remembered finished rollouts (live, read-only)."""
        return self._completed_view

    # -- records --------------------------------------------------------------------------------------

    def lookup(self, key: str) -> RolloutRecord | None:
        """The record under ``key``, running or recently finished."""
        return self.active.get(key) or self.completed.get(key)

    def add(self, record: RolloutRecord) -> None:
        self.active[record.key] = record

    def discard(self, record: RolloutRecord) -> None:
        """Forget a record whose init failed, so the caller may retry with the same key."""
        if self.active.get(record.key) is record:
            del self.active[record.key]

    def finish(self, record: RolloutRecord) -> None:
        """Move a finished rollout from ``active`` to the end of ``completed``."""
        if self.active.get(record.key) is record:
            del self.active[record.key]
        record.task = record.ready = None  # keep only what a duplicate init needs
        record.completed_at = time.monotonic()
        completed = self.completed
        completed.pop(record.key, None)
        completed[record.key] = record
        if len(completed) > self.max_completed_records:
            self._forget(next(iter(completed)))
            if not self._evicted:
                logger.warning(
                    "more than %d finished rollouts within the record TTL; forgetting the oldest early",
                    self.max_completed_records,
                )
            self._evicted += 1

    def _forget(self, key: str) -> None:
        del self.completed[key]
        if self._init_futures:
            self._init_futures.pop(key, None)

    # -- key-based bookkeeping --------------------------------------------------------------------------
    # The public protocol names rollouts by dedup key; these methods let code that drives an AppState
    # by key (its own executor, tests) keep doing so. The server itself works on records.

    def is_duplicate(self, key: str) -> bool:
        """Whether the dedup key ``key`` is running, recently finished or being initialised."""
        return key in self.active or key in self.completed or key in self._init_futures

    def mark_started(self, key: str, task: asyncio.Task[None]) -> None:
        """Record ``task`` as the running rollout under the dedup key ``key``."""
        record = self.active.get(key)
        if record is None:
            record = RolloutRecord(key, key)
            self.add(record)
        record.task = task

    def mark_completed(self, key: str) -> None:
        """Move the rollout under the dedup key ``key`` to the finished records, stamped now."""
        record = self.active.get(key)
        if record is None:
            record = self.completed.get(key) or RolloutRecord(key, key)
        self.finish(record)

    def get_or_create_init_future(self, key: str) -> tuple[asyncio.Future[InitResponse], bool]:
        """The future that carries the init answer for the dedup key ``key``, and whether it is new.

        The caller that gets ``True`` runs the init and resolves the future (or calls
        :meth:`clear_init_record` when it fails); the others await it. Futures are forgotten with the
        finished record they belong to.
        """
        future = self._init_futures.get(key)
        if future is not None:
            return future, False
        future = asyncio.get_running_loop().create_future()
        self._init_futures[key] = future
        return future, True

    def clear_init_record(self, key: str) -> None:
        """Forget the init future under ``key`` after a failed init, so the key may be retried."""
        self._init_futures.pop(key, None)

    def prune(self, now: float | None = None) -> int:
        """Drop finished records older than the TTL; returns how many were dropped."""
        deadline = (time.monotonic() if now is None else now) - self.record_ttl
        dropped = 0
        completed = self.completed
        while completed:
            key = next(iter(completed))
            if completed[key].completed_at >= deadline:
                break
            self._forget(key)
            dropped += 1
        return dropped

    # -- cleanup task ---------------------------------------------------------------------------------

    async def _cleanup_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cleanup_interval)
            try:
                dropped = self.prune()
            except Exception:  # never let the janitor die
                logger.exception("pruning finished rollout records failed")
            else:
                if dropped:
                    logger.debug("pruned %d finished rollout records", dropped)

    def start_cleanup_task(self) -> None:
        """Start the periodic pruning (idempotent while it runs)."""
        if self._cleanup_task is None or self._cleanup_task.done():
            self._cleanup_task = asyncio.get_running_loop().create_task(self._cleanup_loop())

    async def stop_cleanup_task(self) -> None:
        task, self._cleanup_task = self._cleanup_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def cancel_all(self, timeout: float | None = None) -> tuple[int, int]:
        """Cancel every unfinished rollout task and wait for them, at most ``timeout`` seconds when given.

        Returns (cancelled, errored) among the tasks that ended in time.
        """
        tasks = [record.task for record in list(self.active.values()) if record.task is not None]
        for task in tasks:
            task.cancel()
        done: set[asyncio.Task[None]] = set()
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=timeout)
            if pending:
                logger.warning(
                    "%d rollout tasks did not end within %g s of being cancelled", len(pending), timeout
                )
        cancelled = sum(task.cancelled() for task in done)
        errored = sum(not task.cancelled() and task.exception() is not None for task in done)
        self.active.clear()
        return cancelled, errored


# -- the dedupe state shared by several processes ---------------------------------------------------------
#
# ``AppState`` above is one process's view. When several processes serve one agent (``--workers``
# on a host, replicas behind a load balancer), each new dedup key is also *claimed* in a
# :class:`SharedState` before its rollout starts, so a duplicate init that lands on another process
# answers 202 instead of running the rollout again. A claim names its owner (one per process); it is
# released when TrainGate acknowledges the result, and it counts only while its owner is alive:
# owners renew a heartbeat, and a claim whose owner stopped renewing it for ``lease_seconds`` (the
# process died mid-run: there is no result to wait for) may be taken by the next init, as a
# restarted single server runs a repeated init afresh. A restarted process adopts the claims of the
# results its outbox still holds. A claim is kept for the record TTL after it was made or last
# renewed; each heartbeat renews the claims of the rollouts its owner still runs, so a rollout that
# outlives the TTL stays claimed, and a finished one's claim ages from its last beat like a
# finished record.


class SharedStateUnavailable(OsmosisRolloutError):
    """The shared dedupe state cannot be reached now; the init is refused with 503 and ``Retry-After``."""


@dataclass(frozen=True)
class Claim:
    """A dedup key held by a live process: the rollout it names, and the 202 body once its init
    answered (``None`` before; ``b""`` for a claim adopted after a restart, whose body was not kept)."""

    rollout_id: str
    body: bytes | None


class SharedState(Protocol):
    """Where claims live (see the comment above); every method may raise :class:`SharedStateUnavailable`."""

    where: str  # for messages: "memory", a file, a URL without its password
    lease_seconds: float

    async def claim(self, key: str, rollout_id: str) -> Claim | None:
        """Claim ``key`` for this process (``None``), or the live claim another init holds."""
        ...

    async def answered(self, key: str, body: bytes) -> None:
        """Store the 202 body of this process's claim on ``key`` for duplicates elsewhere."""
        ...

    async def lookup(self, key: str) -> Claim | None:
        """The live claim on ``key``, if any."""
        ...

    async def release(self, key: str) -> None:
        """Drop this process's claim on ``key`` (its init failed, or its result was acknowledged)."""
        ...

    async def adopt(self, keys: Mapping[str, str]) -> None:
        """Claim ``{key: rollout_id}`` for this process, whoever held them: results its outbox holds."""
        ...

    async def heartbeat(self, running: Collection[str] = ()) -> None:
        """Renew this process's liveness and its claims on the ``running`` keys (and prune what expired)."""
        ...

    async def close(self) -> None: ...


def owner_id(pid: int | None = None) -> str:
    """The owner name of a process in a shared state: host, pid and a per-process token."""
    return f"{socket.gethostname()}/{os.getpid() if pid is None else pid}/{_TOKEN}"


_TOKEN = secrets.token_hex(4)
DEFAULT_LEASE_SECONDS = 10.0
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class MemoryState:
    """One process: its ``AppState`` records are the whole state, so nothing is claimed elsewhere."""

    where = "memory"
    lease_seconds = DEFAULT_LEASE_SECONDS

    async def claim(self, key: str, rollout_id: str) -> Claim | None:
        return None

    async def answered(self, key: str, body: bytes) -> None:
        return None

    async def lookup(self, key: str) -> Claim | None:
        return None

    async def release(self, key: str) -> None:
        return None

    async def adopt(self, keys: Mapping[str, str]) -> None:
        return None

    async def heartbeat(self, running: Collection[str] = ()) -> None:
        return None

    async def close(self) -> None:
        return None


# ``created``: when the claim was made or last renewed (it is dropped ``record_ttl`` later)
_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, rollout_id TEXT NOT NULL, owner TEXT NOT NULL, "
    "body BLOB, created REAL NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, beat REAL NOT NULL) WITHOUT ROWID",
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
            if directory:
                os.makedirs(directory, exist_ok=True)
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

    def _run(self, action: Callable[[], V]) -> V:
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

    def forget_process(self, pid: int) -> None:
        """Declare every owner of process ``pid`` of this host dead (its supervisor saw it end)."""
        prefix = owner_id(pid).rsplit("/", 1)[0] + "/"
        self._run(lambda: self._db.execute("DELETE FROM owners WHERE substr(owner, 1, ?) = ?",
                                           (len(prefix), prefix)))  # fmt: skip

    async def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._db.execute("DELETE FROM owners WHERE owner = ?", (self.owner,))
        self._db.close()


# KEYS[1]: the claim; ARGV: owner-key prefix, owner, rollout_id, record TTL ms, lease ms
_REDIS_CLAIM = """
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and redis.call('EXISTS', ARGV[1] .. owner) == 1 then
  return redis.call('HMGET', KEYS[1], 'rollout_id', 'body')
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'rollout_id', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', ARGV[1] .. ARGV[2], '1', 'PX', ARGV[5])
return false
"""
# KEYS[1]: the claim; ARGV: owner-key prefix
_REDIS_LOOKUP = """
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and redis.call('EXISTS', ARGV[1] .. owner) == 1 then
  return redis.call('HMGET', KEYS[1], 'rollout_id', 'body')
end
return false
"""
# KEYS[1]: the owner's key, then the claims to renew; ARGV: owner, lease ms, record TTL ms
_REDIS_BEAT = """
redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
for i = 2, #KEYS do
  if redis.call('HGET', KEYS[i], 'owner') == ARGV[1] then redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
end
"""
# KEYS[1]: the claim; ARGV: owner, then 'release' or the body to store
_REDIS_OWNED = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if ARGV[2] == 'release' then return redis.call('DEL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'body', ARGV[3])
return 1
"""


def redis_location(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}:***@" if parts.username else "***@"
    return parts._replace(netloc=user + netloc).geturl()


class RedisState:
    """Claims in Redis, shared by replicas on any number of hosts (``redis://HOST:PORT/DB``).

    A claim is a hash with the record TTL (renewed with its owner's key by :meth:`heartbeat` while
    its rollout runs); an owner is alive while its key (``lease_seconds``) exists. Each step is one
    Lua script, so claiming is atomic. One connection pool per process, opened on first use; a command waits at most ``timeout_seconds``,
    so an unreachable Redis answers inits 503 quickly. Redis must keep its data across its own
    restart (``appendonly yes``): one restarted empty forgets the claims of running rollouts.
    """

    prefix = "osmosis:rollout:"
    owner_prefix = "osmosis:owner:"

    def __init__(
        self,
        url: str,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        record_ttl_seconds: float = 3600.0,
        owner: str | None = None,
        timeout_seconds: float = 1.0,
    ) -> None:
        import redis.asyncio as aioredis
        from redis.exceptions import RedisError

        self.where = redis_location(url)
        self.lease_seconds = lease_seconds
        self.owner = owner or owner_id()
        self._ttl_ms = str(int(record_ttl_seconds * 1000))
        self._lease_ms = str(int(lease_seconds * 1000))
        self._errors: tuple[type[BaseException], ...] = (RedisError, OSError)
        self._redis = aioredis.Redis.from_url(
            url, socket_timeout=timeout_seconds, socket_connect_timeout=timeout_seconds
        )
        self._claim = self._redis.register_script(_REDIS_CLAIM)
        self._lookup = self._redis.register_script(_REDIS_LOOKUP)
        self._owned = self._redis.register_script(_REDIS_OWNED)
        self._beat = self._redis.register_script(_REDIS_BEAT)

    async def _run(self, action: Awaitable[V]) -> V:
        try:
            return await action
        except self._errors as exc:
            raise SharedStateUnavailable(f"the shared state {self.where} is unreachable: {exc}") from None

    @staticmethod
    def _claim_of(reply: Any) -> Claim | None:
        if not reply:
            return None
        rollout_id, body = reply
        return Claim(rollout_id.decode(), body)

    async def claim(self, key: str, rollout_id: str) -> Claim | None:
        args = [self.owner_prefix, self.owner, rollout_id, self._ttl_ms, self._lease_ms]
        return self._claim_of(await self._run(self._claim(keys=[self.prefix + key], args=args)))

    async def answered(self, key: str, body: bytes) -> None:
        await self._run(self._owned(keys=[self.prefix + key], args=[self.owner, "body", body]))

    async def lookup(self, key: str) -> Claim | None:
        return self._claim_of(
            await self._run(self._lookup(keys=[self.prefix + key], args=[self.owner_prefix]))
        )

    async def release(self, key: str) -> None:
        await self._run(self._owned(keys=[self.prefix + key], args=[self.owner, "release"]))

    async def adopt(self, keys: Mapping[str, str]) -> None:
        async def adopt() -> None:
            async with self._redis.pipeline(transaction=False) as pipe:
                for key, rollout_id in keys.items():
                    mapping = {"owner": self.owner, "rollout_id": rollout_id, "body": b""}
                    pipe.delete(self.prefix + key)
                    pipe.hset(self.prefix + key, mapping=mapping)  # type: ignore[arg-type]
                    pipe.pexpire(self.prefix + key, int(self._ttl_ms))
                await pipe.execute()

        if keys:
            await self._run(adopt())

    async def heartbeat(self, running: Collection[str] = ()) -> None:
        keys = [self.owner_prefix + self.owner, *(self.prefix + key for key in running)]
        await self._run(self._beat(keys=keys, args=[self.owner, self._lease_ms, self._ttl_ms]))

    async def close(self) -> None:
        with contextlib.suppress(*self._errors):
            await self._redis.delete(self.owner_prefix + self.owner)
        with contextlib.suppress(*self._errors):
            await self._redis.aclose()


def open_state(where: str | None, **options: Any) -> SharedState:
    """The shared state ``where`` names: ``None`` (this process only), a ``redis://``/``rediss://``
    URL, or an SQLite file. ``options``: ``lease_seconds``, ``record_ttl_seconds``, ``owner``."""
    if where is None:
        return MemoryState()
    if where.startswith(REDIS_SCHEMES):
        return RedisState(where, **options)
    return SqliteState(where, **options)
