"""The 0.3 wire's results and polling leases.

Each admitted rollout has one entry from ``POST /rollout`` until ``result_retention_sec`` after it
finished: its status, its result once there is one, and its lease — a random token (only its
SHA-256 is kept) that every poll must carry and that each poll renews. A lease left to expire
ends the rollout: it fails with ``lease_expired`` and its task is cancelled, since nobody is waiting
for it any more. The first result published wins (a cancellation or an expired lease is not
overwritten by a late completion), and an id stays taken while its entry is kept (409).

The entries of the rollouts this process runs are in its memory (their tasks, timers and waiting
pollers). With a :class:`~osmosis_ai.rollout.server.state_shared.ResultStore` (the SQLite file or
Redis the processes serving one workflow share) every rollout is also stored there: admitted
before its 202 (so an id is taken across processes), its result as it happens, and its in-flight
statuses and lease renewals gathered for :data:`PROGRESS_WRITE_SECONDS` into one write of them
all (a rollout finished by then has only its result written). A poll on a process that does not
run the rollout is answered from the store, and a rollout whose owner died (SIGKILL, OOM, a
crash) answers a typed failure saying it was lost with its process: it is never run again, and
its id never becomes unknown before its retention ends.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.state_shared import (
    CANCELLED_QUEUED,
    CANCELLED_RUNNING,
    HEARTBEATS_PER_LEASE,
    NOT_FOUND,
    ResultStore,
    StoredRollout,
)
from osmosis_ai.rollout.types.protocol import RolloutResultResponse
from osmosis_ai.rollout.types.status import FINISHED, RolloutErrorCategory, RolloutStatus

logger = logging.getLogger(__name__)

LOST_MESSAGE = (
    "lost: the server process running this rollout ended (killed or crashed) before it finished; "
    "it was not run again"
)
CLOSE_WRITES_SECONDS = 5.0
CANCEL_CHECK_SECONDS = 0.1  # how soon a rollout cancelled on another process stops here
_TOLD_LIMIT = 10_000
_STORE_POLL_SECONDS = (0.02, 0.5)  # a poll of another process's rollout re-reads the store this often
PROGRESS_WRITE_SECONDS = 0.05  # how stale another process may find a rollout's status or lease here


class UnknownRollout(KeyError):
    """No rollout with this id is kept (never admitted, or forgotten after its retention)."""


class BadLease(PermissionError):
    """The poll carried a lease token that is not this rollout's."""


class DuplicateRollout(ValueError):
    """A rollout with this id is already kept."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


@dataclass(eq=False)
class _Entry:
    rollout_id: str
    digest: bytes
    lease_deadline: float
    status: RolloutStatus = RolloutStatus.QUEUED
    answered: RolloutStatus = RolloutStatus.QUEUED  # the status the last answer gave (202 says queued)
    result: RolloutResultResponse | None = None
    changed: asyncio.Future[None] | None = None  # what its pollers wait on, made by the first of them
    task: asyncio.Task[None] | None = None
    cancelled_as: str | None = None
    timer: asyncio.TimerHandle | None = None


class Results03:
    """See the module docstring. Used from the event loop only: no method awaits while it changes
    an entry, so no lock is needed; writes to the store run as tasks of their own (the store keeps
    the first result, so their order does not matter)."""

    def __init__(
        self,
        *,
        result_wait_timeout_sec: float,
        polling_lease_timeout_sec: float,
        result_retention_sec: float,
        store: ResultStore | None = None,
    ) -> None:
        self.wait_timeout = result_wait_timeout_sec
        self.lease_timeout = polling_lease_timeout_sec
        self.retention = result_retention_sec
        self.store = store
        self._entries: dict[str, _Entry] = {}
        self._writes: set[asyncio.Task[None]] = set()
        # the in-flight statuses and lease renewals not stored yet, and the timer that stores them
        self._statuses: dict[str, str] = {}
        self._leases: dict[str, float] = {}
        self._progress: asyncio.TimerHandle | None = None
        self._janitor: asyncio.Task[None] | None = None
        self._cancels: asyncio.Task[None] | None = None
        self._open: set[str] = set()  # the unfinished rollouts admitted here
        self._busy = asyncio.Event()  # set while there are some
        # the status last answered here for a rollout another process runs (the most recent ones)
        self._told: collections.OrderedDict[str, str] = collections.OrderedDict()

    # -- admission ------------------------------------------------------------------------------

    async def register(self, rollout_id: str) -> str:
        """Keep a new rollout as queued; its lease token (``DuplicateRollout`` if the id is kept
        here or in the store; ``SharedStateUnavailable`` when the store cannot be reached)."""
        if rollout_id in self._entries:
            raise DuplicateRollout(rollout_id)
        token = secrets.token_urlsafe(32)
        digest = _digest(token)
        if self.store is not None:
            if not await self.store.admit_rollout(rollout_id, digest, time.time() + self.lease_timeout):
                raise DuplicateRollout(rollout_id)
            if rollout_id in self._entries:  # admitted here while the store answered
                raise DuplicateRollout(rollout_id)
        loop = asyncio.get_running_loop()
        entry = _Entry(rollout_id, digest, loop.time() + self.lease_timeout)
        self._entries[rollout_id] = entry
        self._open.add(rollout_id)
        self._busy.set()
        entry.timer = loop.call_at(entry.lease_deadline, self._lease_due, entry)
        return token

    def bind(self, rollout_id: str, task: asyncio.Task[None]) -> None:
        """The task running the rollout: cancelled by a cancel or an expired lease."""
        self._entries[rollout_id].task = task

    # -- progress -------------------------------------------------------------------------------

    def set_status(self, rollout_id: str, status: RolloutStatus) -> None:
        """Move an unfinished rollout to the in-flight ``status`` and wake its pollers (a finished
        status comes only with the result, through :meth:`finish`)."""
        entry = self._entries.get(rollout_id)
        if entry is None or entry.result is not None or entry.status is status or status in FINISHED:
            return
        entry.status = status
        if self.store is not None:
            self._statuses[rollout_id] = status.value
            self._progressed()
        self._wake(entry)

    async def finish(self, rollout_id: str, response: RolloutResultResponse) -> None:
        """Publish the rollout's result, unless one was published already; after its lease expired
        the result is the lease failure, whatever ``response`` says. With a store, the result is
        stored before any poll sees it, so a result once answered survives the process."""
        entry = self._entries.get(rollout_id)
        if entry is None or entry.result is not None:
            return
        store = self.store
        if store is None:
            if asyncio.get_running_loop().time() >= entry.lease_deadline:
                response = _lease_failure(rollout_id)
            self._publish(entry, response)
            return
        try:
            if asyncio.get_running_loop().time() >= entry.lease_deadline:
                # a poll on another process may have renewed it there
                stored = await store.stored_rollout(rollout_id)
                if stored is None or stored.lease_until <= time.time():
                    response = _lease_failure(rollout_id)
            ours = _encoded(response)
            kept = await store.finish_rollout(rollout_id, response.status.value, ours, self.retention)
        except SharedStateUnavailable as exc:
            logger.warning(
                "rollout %s: its result was not stored (a restart will call it lost): %s", rollout_id, exc
            )
        else:
            if kept != ours:  # another process stored a result first: that one is the result
                response = RolloutResultResponse.model_validate_json(kept)
        if entry.result is None:
            self._publish(entry, response, stored=True)
        else:  # a cancel or an expired lease published meanwhile: the store's first result wins
            entry.result = response
            entry.status = response.status

    def _publish(self, entry: _Entry, response: RolloutResultResponse, stored: bool = False) -> None:
        self._open.discard(entry.rollout_id)
        if not self._open:
            self._busy.clear()
        entry.result = response
        entry.status = response.status
        if entry.timer is not None:
            entry.timer.cancel()
        entry.timer = asyncio.get_running_loop().call_later(self.retention, self._retained, entry)
        if self.store is not None and not stored:
            self._write(self._stored_result(entry, response))
        self._wake(entry)

    async def _stored_result(self, entry: _Entry, response: RolloutResultResponse) -> None:
        """Store ``response``; when the store holds another result already (another process saw
        this one's heartbeat stop, or its lease end, and answered for it), that one is the result
        here too, so every process answers the same."""
        assert self.store is not None
        ours = _encoded(response)
        kept = await self.store.finish_rollout(entry.rollout_id, response.status.value, ours, self.retention)
        if kept != ours and entry.result is response:
            entry.result = RolloutResultResponse.model_validate_json(kept)
            entry.status = entry.result.status

    @staticmethod
    def _wake(entry: _Entry) -> None:
        if entry.changed is not None:
            if not entry.changed.done():
                entry.changed.set_result(None)
            entry.changed = None

    def _progressed(self) -> None:
        if self._progress is None:
            self._progress = asyncio.get_running_loop().call_later(
                PROGRESS_WRITE_SECONDS, self._store_progress
            )

    def _store_progress(self) -> asyncio.Task[None] | None:
        """Write the statuses and lease renewals noted since the last write, of the rollouts still
        unfinished (a finished one's stored result supersedes them); the task writing them."""
        if self._progress is not None:
            self._progress.cancel()
            self._progress = None
        assert self.store is not None
        unfinished = self._open
        statuses = {key: status for key, status in self._statuses.items() if key in unfinished}
        leases = {key: lease for key, lease in self._leases.items() if key in unfinished}
        self._statuses, self._leases = {}, {}
        return self._write(self.store.progress_rollouts(statuses, leases)) if statuses or leases else None

    def _write(self, action: Awaitable[object]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._written(action))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return task

    async def _written(self, action: Awaitable[object]) -> None:
        try:
            await action
        except SharedStateUnavailable as exc:
            logger.warning("a 0.3 rollout's state was not stored: %s", exc)

    # -- polling --------------------------------------------------------------------------------

    async def wait(self, rollout_id: str, token: str) -> RolloutResultResponse:
        """The result, or after at most ``result_wait_timeout_sec`` (sooner on a status change) the
        current status; renews the lease. A status that changed since the last answer (the 202's
        ``queued`` the first) is answered at once: a poll never waits for a change that happened
        before it arrived. ``UnknownRollout``, ``BadLease`` as their names say;
        ``SharedStateUnavailable`` when the rollout is another process's and the store failed."""
        entry = self._entries.get(rollout_id)
        if entry is None:
            if self.store is None:
                raise UnknownRollout(rollout_id)
            return await self._wait_stored(rollout_id, token)
        if not hmac.compare_digest(entry.digest, _digest(token)):
            raise BadLease(rollout_id)
        if entry.result is None:
            loop = asyncio.get_running_loop()
            if loop.time() >= entry.lease_deadline:
                self._expire(entry)
            else:
                entry.lease_deadline = loop.time() + self.lease_timeout
                if entry.timer is not None:
                    entry.timer.cancel()
                entry.timer = loop.call_at(entry.lease_deadline, self._lease_due, entry)
                if self.store is not None:
                    self._leases[rollout_id] = time.time() + self.lease_timeout
                    self._progressed()
        if entry.result is not None:
            return entry.result
        if entry.status is entry.answered:  # a change since the last answer is told at once
            if entry.changed is None:
                entry.changed = asyncio.get_running_loop().create_future()
            await asyncio.wait((entry.changed,), timeout=self.wait_timeout)
            if entry.result is not None:
                return entry.result
        # a status is told once it is stored, so a cancel decided by another process agrees with it
        while self._statuses.get(rollout_id) == entry.status.value and entry.result is None:
            written = self._store_progress()
            if written is not None:
                await asyncio.wait((written,))
        if entry.result is not None:
            return entry.result
        entry.answered = entry.status
        return RolloutResultResponse(rollout_id=rollout_id, status=entry.status)

    async def _stored(self, rollout_id: str) -> StoredRollout:
        assert self.store is not None
        stored = await self.store.stored_rollout(rollout_id)
        if stored is None:
            raise UnknownRollout(rollout_id)
        return stored

    async def _wait_stored(self, rollout_id: str, token: str) -> RolloutResultResponse:
        """:meth:`wait` for a rollout another process runs (or ran): read from the store, which has
        no way to wake this poll, so it is re-read until a result, a status change or the wait's end.
        A status other than the one this process last answered for it (``queued``, as the 202 said,
        when it answered none) is answered at once, as the owner does."""
        store = self.store
        assert store is not None
        stored = await self._stored(rollout_id)
        if not hmac.compare_digest(stored.digest, _digest(token)):
            raise BadLease(rollout_id)
        loop = asyncio.get_running_loop()
        end = loop.time() + self.wait_timeout
        pause, longest = _STORE_POLL_SECONDS
        renewed = False
        seen = stored.status
        told = self._told.get(rollout_id, RolloutStatus.QUEUED.value)
        while stored.result is None:
            ended: RolloutResultResponse | None = None
            if not stored.owner_alive:
                ended = _lost(rollout_id)
            elif stored.lease_until <= time.time():
                ended = _lease_failure(rollout_id)
            if ended is not None:
                self._told.pop(rollout_id, None)
                kept = await store.finish_rollout(
                    rollout_id, ended.status.value, _encoded(ended), self.retention
                )
                return RolloutResultResponse.model_validate_json(kept)
            if not renewed:
                await store.progress_rollouts({}, {rollout_id: time.time() + self.lease_timeout})
                renewed = True
            left = end - loop.time()
            if left <= 0 or stored.status != seen or stored.status != told:  # a change is told at once
                self._told[rollout_id] = stored.status
                self._told.move_to_end(rollout_id)
                if len(self._told) > _TOLD_LIMIT:
                    self._told.popitem(last=False)
                return RolloutResultResponse(rollout_id=rollout_id, status=RolloutStatus(stored.status))
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, longest)
            stored = await self._stored(rollout_id)
        self._told.pop(rollout_id, None)
        return RolloutResultResponse.model_validate_json(stored.result)

    def _lease_due(self, entry: _Entry) -> None:
        if self._entries.get(entry.rollout_id) is not entry or entry.result is not None:
            return
        if self.store is None:
            self._expire(entry)
        else:  # polls on other processes renew the lease in the store only
            self._write(self._lease_recheck(entry))

    async def _lease_recheck(self, entry: _Entry) -> None:
        assert self.store is not None
        try:
            stored = await self.store.stored_rollout(entry.rollout_id)
        except SharedStateUnavailable as exc:  # no renewal can be seen: the lease this process knows ends it
            logger.warning("rollout %s: its lease ends here (%s)", entry.rollout_id, exc)
            stored = None
        if entry.result is not None:
            return
        loop = asyncio.get_running_loop()
        left = 0.0 if stored is None or stored.result is not None else stored.lease_until - time.time()
        if left > 0:
            entry.lease_deadline = loop.time() + left
            entry.timer = loop.call_at(entry.lease_deadline, self._lease_due, entry)
            return
        ended = None if stored is None or stored.result is None else stored.result
        self._publish(
            entry,
            _lease_failure(entry.rollout_id)
            if ended is None
            else RolloutResultResponse.model_validate_json(ended),
        )
        if entry.task is not None:
            entry.task.cancel()

    def _expire(self, entry: _Entry) -> None:
        self._publish(entry, _lease_failure(entry.rollout_id))
        if entry.task is not None:
            entry.task.cancel()

    # -- cancellation ---------------------------------------------------------------------------

    async def cancel(
        self, ids: Sequence[str] | None = None, prefix: str | None = None, all: bool = False
    ) -> dict[str, str]:
        """Cancel the selected unfinished rollouts: ``{id: disposition}``. Asking again answers the
        same; a finished or unknown id is ``not_found``. With a store the selection and the
        dispositions are the store's, so a rollout another process runs is cancelled too (its
        owner stops it when it next reads its cancels: :meth:`_taking_cancels`);
        ``SharedStateUnavailable`` when the store cannot be reached."""
        if all:
            selected: Sequence[str] = list(self._entries)
        elif prefix is not None:
            selected = [rollout_id for rollout_id in self._entries if rollout_id.startswith(prefix)]
        else:
            selected = list(ids or ())
        if self.store is None:
            return {rollout_id: self._cancel(rollout_id) for rollout_id in selected}
        if all or prefix is not None:
            stored = await self.store.cancellable_rollouts(None if all else prefix)
            selected = list(dict.fromkeys([*selected, *stored]))
        self._store_progress()  # the statuses told so far, so the store's dispositions are this process's
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=CLOSE_WRITES_SECONDS)
        dispositions = {}
        for rollout_id in selected:
            cancelled = _cancelled(rollout_id)
            disposition = await self.store.cancel_rollout(rollout_id, _encoded(cancelled), self.retention)
            entry = self._entries.get(rollout_id)
            if entry is not None and disposition != NOT_FOUND:
                self._stop(entry, cancelled, disposition)
            elif entry is not None:  # the store lost it (a Redis restarted empty): this process knows better
                disposition = self._cancel(rollout_id)
            dispositions[rollout_id] = disposition
        return dispositions

    def _cancel(self, rollout_id: str) -> str:
        entry = self._entries.get(rollout_id)
        if entry is None:
            return NOT_FOUND
        if entry.cancelled_as is not None:
            return entry.cancelled_as
        if entry.result is not None:
            return NOT_FOUND
        disposition = CANCELLED_QUEUED if entry.status is RolloutStatus.QUEUED else CANCELLED_RUNNING
        self._stop(entry, _cancelled(rollout_id), disposition)
        return disposition

    def _stop(self, entry: _Entry, cancelled: RolloutResultResponse, disposition: str) -> None:
        """End ``entry`` as cancelled (the store holds that result already, when there is one)."""
        if entry.cancelled_as is None:
            entry.cancelled_as = disposition
        if entry.result is None:
            self._publish(entry, cancelled, stored=True)
        elif entry.result.status is not RolloutStatus.CANCELLED:
            entry.result = cancelled  # a late completion published here meanwhile: the store's result wins
            entry.status = cancelled.status
        if entry.task is not None:
            entry.task.cancel()

    async def _taking_cancels(self) -> None:
        """Stop the rollouts of this process that other processes cancelled: the store's counter of
        cancels is read every :data:`CANCEL_CHECK_SECONDS` while a rollout here is unfinished (not
        at all when idle), and the cancelled ones among them looked up when it moved."""
        assert self.store is not None
        seen = -1
        failing = False
        while True:
            await self._busy.wait()
            await asyncio.sleep(CANCEL_CHECK_SECONDS)
            if not self._open:
                continue
            try:
                seen, cancelled = await self.store.cancels_since(seen, list(self._open))
            except SharedStateUnavailable as exc:
                if not failing:
                    logger.warning("the cancels of other processes cannot be read: %s", exc)
                failing = True
                continue
            failing = False
            for rollout_id in cancelled:
                entry = self._entries.get(rollout_id)
                if entry is not None and entry.result is None:
                    logger.info("rollout %s: cancelled by another process", rollout_id)
                    self._stop(entry, _cancelled(rollout_id), CANCELLED_RUNNING)

    # -- forgetting -----------------------------------------------------------------------------

    def _retained(self, entry: _Entry) -> None:
        """The retention is over: forget the entry once its task has ended too (until then the id
        stays taken, so a late completion cannot touch a new rollout of the same id)."""
        if entry.task is not None and not entry.task.done():
            entry.task.add_done_callback(lambda _: self._forget(entry))
        else:
            self._forget(entry)

    def _forget(self, entry: _Entry) -> None:
        if self._entries.get(entry.rollout_id) is entry:
            del self._entries[entry.rollout_id]

    async def start(self) -> None:
        """With a store: mark this process alive in it, and keep it so while serving (the beat also
        ends the rollouts of dead owners as lost and forgets the results kept past their time)."""
        if self.store is not None:
            await self._sweep()
            loop = asyncio.get_running_loop()
            self._janitor = loop.create_task(self._sweeping())
            self._cancels = loop.create_task(self._taking_cancels())

    async def _sweeping(self) -> None:
        assert self.store is not None
        while True:
            await asyncio.sleep(self.store.lease_seconds / HEARTBEATS_PER_LEASE)
            await self._sweep()

    async def _sweep(self) -> None:
        store = self.store
        assert store is not None
        try:
            await store.heartbeat()
            for rollout_id in await store.dead_rollouts():
                lost = _lost(rollout_id)
                await store.finish_rollout(rollout_id, lost.status.value, _encoded(lost), self.retention)
            await store.prune_rollouts()
        except SharedStateUnavailable as exc:
            logger.warning("the 0.3 rollouts' state: %s", exc)

    async def close(self) -> None:
        """Stop every lease and retention timer (the app is shutting down); with a store, store
        what is still being written, then close it."""
        for entry in self._entries.values():
            if entry.timer is not None:
                entry.timer.cancel()
        for task in (self._janitor, self._cancels):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._janitor = self._cancels = None
        if self.store is not None:
            self._store_progress()
            if self._writes:
                await asyncio.wait(set(self._writes), timeout=CLOSE_WRITES_SECONDS)
            await self.store.close()


def _encoded(response: RolloutResultResponse) -> bytes:
    return response.model_dump_json().encode()


def _lost(rollout_id: str) -> RolloutResultResponse:
    return RolloutResultResponse(
        rollout_id=rollout_id,
        status=RolloutStatus.FAILURE,
        err_message=LOST_MESSAGE,
        err_category=RolloutErrorCategory.INTERNAL_ERROR,
    )


def _cancelled(rollout_id: str) -> RolloutResultResponse:
    return RolloutResultResponse(
        rollout_id=rollout_id, status=RolloutStatus.CANCELLED, err_message="cancelled"
    )


def _lease_failure(rollout_id: str) -> RolloutResultResponse:
    return RolloutResultResponse(
        rollout_id=rollout_id,
        status=RolloutStatus.FAILURE,
        err_message="the polling lease expired: nobody polled the result in time",
        err_category=RolloutErrorCategory.LEASE_EXPIRED,
    )
