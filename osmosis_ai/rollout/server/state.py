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

What several processes serving one agent share is a
:class:`~osmosis_ai.rollout.server.state_shared.SharedState` of claims, in the modules beside this
one (``state_shared``: the contract; ``state_memory``, ``state_sqlite``, ``state_redis``: its
backends); :func:`open_state` picks one, and their names are importable from here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.state_memory import MemoryState
from osmosis_ai.rollout.server.state_redis import REDIS_SCHEMES, RedisState, check_location, redis_location
from osmosis_ai.rollout.server.state_shared import DEFAULT_LEASE_SECONDS, Claim, SharedState, owner_id
from osmosis_ai.rollout.server.state_sqlite import SqliteState

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutServerSettings
    from osmosis_ai.rollout.core.schemas import InitResponse, OpenAIFunctionToolSchema

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "MAX_COMPLETED_RECORDS",
    "REDIS_SCHEMES",
    "AppState",
    "Claim",
    "MemoryState",
    "RecordView",
    "RedisState",
    "RolloutRecord",
    "SharedState",
    "SharedStateUnavailable",
    "SqliteState",
    "open_state",
    "owner_id",
    "redis_location",
]

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


def open_state(where: str | None, **options: Any) -> SharedState:
    """The shared state ``where`` names: ``None`` (this process only), a ``redis://``/``rediss://``
    URL, or an SQLite file in a directory that exists (:class:`RolloutValueError` for anything
    else that looks like a URL: :func:`check_location`). ``options``: ``lease_seconds``, ``record_ttl_seconds``, ``owner``."""
    if where is None:
        return MemoryState()
    check_location(where)
    if where.startswith(REDIS_SCHEMES):
        return RedisState(where, **options)
    return SqliteState(where, **options)
