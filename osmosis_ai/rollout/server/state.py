"""Per-app bookkeeping of rollouts: who is running, who is queued, who finished recently.

Every accepted init creates one :class:`RolloutRecord` under its dedup key (``idempotency_key`` or,
when that is empty, ``rollout_id`` — one namespace for both, as in osmosis-ai 0.2). A record lives in
``active`` from acceptance until its task ends, then moves to ``completed`` where it is kept for
``record_ttl`` seconds so retried inits are answered without starting the rollout again.

Memory is bounded by design (0.2 defect D27): a finished record keeps only what a duplicate init needs
— the original ``rollout_id`` and a reference to the serialized tool list — plus its completion time.
Equal tool lists are one shared bytes object (``ToolsSerializer`` interns them), so a record costs
about 230 bytes with a 36-character id (measured with tracemalloc over 100,000 records, CPython 3.11),
~230 MB at ``MAX_COMPLETED_RECORDS``; only an agent whose tools differ for every rollout adds its
tools JSON per record on top (a 2 KB list: ~2 GB at the cap, so lower the record TTL). ``completed`` is
ordered by completion time, so pruning stops at the first record that is still fresh instead of
scanning everything, and it never holds more than ``MAX_COMPLETED_RECORDS`` (the oldest go first, with
a warning: duplicates of those would run again, as after the TTL).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutServerSettings

logger = logging.getLogger(__name__)

MAX_COMPLETED_RECORDS = 1_000_000


class RolloutRecord:
    """One accepted rollout. ``task`` is ``None`` once the rollout has finished (or before it starts)."""

    __slots__ = ("completed_at", "key", "ready", "rollout_id", "task", "tools_json")

    def __init__(self, key: str, rollout_id: str) -> None:
        self.key = key
        self.rollout_id = rollout_id
        self.tools_json: bytes | None = None  # set once get_tools has answered
        self.task: asyncio.Task[None] | None = None
        self.completed_at = 0.0
        # Created only when a duplicate init arrives while get_tools is still running.
        self.ready: asyncio.Future[None] | None = None


def _positive_or_default(value: float | None, default: float) -> float:
    # 0.2 treated 0 as "unset" (D18); an explicit non-positive value is a programming error now.
    if value is None:
        return default
    if value <= 0:
        raise ValueError(f"expected a positive number, got {value!r}")
    return value


class AppState:
    """Rollout records, the concurrency semaphore and the periodic cleanup task of one app.

    Constructor and attributes keep the 0.2 names (``max_concurrent``, ``record_ttl``, ``semaphore``,
    ``rollout_tasks``, ``completed_rollouts``, ``active_count``, ``completed_count``).
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
        self._cleanup_task: asyncio.Task[None] | None = None

    # -- counters -------------------------------------------------------------------------------------

    @property
    def max_concurrent(self) -> int:
        return self._max_concurrent

    @property
    def active_count(self) -> int:
        """Accepted rollouts not finished yet, queued ones included (the 0.2 ``/health`` figure)."""
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
        """Snapshot ``{dedup key: task}`` of the unfinished rollouts."""
        return {key: record.task for key, record in self.active.items() if record.task is not None}

    @property
    def completed_rollouts(self) -> Mapping[str, float]:
        """Snapshot ``{dedup key: monotonic completion time}`` of the remembered finished rollouts."""
        return {key: record.completed_at for key, record in self.completed.items()}

    # -- records --------------------------------------------------------------------------------------

    def lookup(self, key: str) -> RolloutRecord | None:
        """The record under ``key``, running or recently finished."""
        return self.active.get(key) or self.completed.get(key)

    def is_duplicate(self, key: str) -> bool:
        return key in self.active or key in self.completed

    def add(self, record: RolloutRecord) -> None:
        self.active[record.key] = record

    def discard(self, record: RolloutRecord) -> None:
        """Forget a record whose init failed, so the caller may retry with the same key."""
        if self.active.get(record.key) is record:
            del self.active[record.key]

    def mark_completed(self, record: RolloutRecord) -> None:
        """Move a finished rollout from ``active`` to the end of ``completed``."""
        if self.active.get(record.key) is record:
            del self.active[record.key]
        record.task = record.ready = None  # keep only what a duplicate init needs
        record.completed_at = time.monotonic()
        completed = self.completed
        completed.pop(record.key, None)
        completed[record.key] = record
        if len(completed) > self.max_completed_records:
            del completed[next(iter(completed))]
            if not self._evicted:
                logger.warning(
                    "more than %d finished rollouts within the record TTL; forgetting the oldest early",
                    self.max_completed_records,
                )
            self._evicted += 1

    def prune(self, now: float | None = None) -> int:
        """Drop finished records older than the TTL; returns how many were dropped."""
        deadline = (time.monotonic() if now is None else now) - self.record_ttl
        dropped = 0
        completed = self.completed
        while completed:
            key = next(iter(completed))
            if completed[key].completed_at >= deadline:
                break
            del completed[key]
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
