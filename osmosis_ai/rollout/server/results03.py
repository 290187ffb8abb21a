"""The 0.3 wire's results and polling leases, kept in this process's memory.

Each admitted rollout has one entry from ``POST /rollout`` until ``result_retention_sec`` after it
finished: its status, its result once there is one, and its lease — a random token (only its
SHA-256 is kept) that every poll must carry and that each poll renews. A lease left to expire
ends the rollout: it fails with ``lease_expired`` and its task is cancelled, since nobody is waiting
for it any more. The first result published wins (a cancellation or an expired lease is not
overwritten by a late completion), and an id stays taken while its entry is kept (409).

This class is the seam for durable results: everything the wire needs from results and leases
goes through its methods (``register``, ``bind``, ``set_status``, ``finish``, ``wait``, ``cancel``,
``close``), so a variant keeping them in the shared state (SQLite, Redis) replaces it alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from osmosis_ai.rollout.types.protocol import RolloutResultResponse
from osmosis_ai.rollout.types.status import FINISHED, RolloutErrorCategory, RolloutStatus

CANCELLED_QUEUED = "cancelled_queued"
CANCELLED_RUNNING = "cancelled_running"
NOT_FOUND = "not_found"


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
    result: RolloutResultResponse | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    cancelled_as: str | None = None
    timer: asyncio.TimerHandle | None = None


class Results03:
    """See the module docstring. Used from the event loop only: no method awaits while it changes
    an entry, so no lock is needed."""

    def __init__(
        self, *, result_wait_timeout_sec: float, polling_lease_timeout_sec: float, result_retention_sec: float
    ) -> None:
        self.wait_timeout = result_wait_timeout_sec
        self.lease_timeout = polling_lease_timeout_sec
        self.retention = result_retention_sec
        self._entries: dict[str, _Entry] = {}

    # -- admission ------------------------------------------------------------------------------

    def register(self, rollout_id: str) -> str:
        """Keep a new rollout as queued; its lease token (``DuplicateRollout`` if the id is kept)."""
        if rollout_id in self._entries:
            raise DuplicateRollout(rollout_id)
        loop = asyncio.get_running_loop()
        token = secrets.token_urlsafe(32)
        entry = _Entry(rollout_id, _digest(token), loop.time() + self.lease_timeout)
        self._entries[rollout_id] = entry
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
        self._wake(entry)

    def finish(self, rollout_id: str, response: RolloutResultResponse) -> None:
        """Publish the rollout's result, unless one was published already; after its lease expired
        the result is the lease failure, whatever ``response`` says."""
        entry = self._entries.get(rollout_id)
        if entry is None or entry.result is not None:
            return
        if asyncio.get_running_loop().time() >= entry.lease_deadline:
            response = _lease_failure(rollout_id)
        self._publish(entry, response)

    def _publish(self, entry: _Entry, response: RolloutResultResponse) -> None:
        entry.result = response
        entry.status = response.status
        if entry.timer is not None:
            entry.timer.cancel()
        entry.timer = asyncio.get_running_loop().call_later(self.retention, self._retained, entry)
        self._wake(entry)

    @staticmethod
    def _wake(entry: _Entry) -> None:
        entry.changed.set()
        entry.changed = asyncio.Event()

    # -- polling --------------------------------------------------------------------------------

    async def wait(self, rollout_id: str, token: str) -> RolloutResultResponse:
        """The result, or after at most ``result_wait_timeout_sec`` (sooner on a status change) the
        current status; renews the lease. ``UnknownRollout``, ``BadLease`` as their names say."""
        entry = self._entries.get(rollout_id)
        if entry is None:
            raise UnknownRollout(rollout_id)
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
        if entry.result is not None:
            return entry.result
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(entry.changed.wait(), self.wait_timeout)
        if entry.result is not None:
            return entry.result
        return RolloutResultResponse(rollout_id=rollout_id, status=entry.status)

    def _lease_due(self, entry: _Entry) -> None:
        if self._entries.get(entry.rollout_id) is entry and entry.result is None:
            self._expire(entry)

    def _expire(self, entry: _Entry) -> None:
        self._publish(entry, _lease_failure(entry.rollout_id))
        if entry.task is not None:
            entry.task.cancel()

    # -- cancellation ---------------------------------------------------------------------------

    def cancel(
        self, ids: Sequence[str] | None = None, prefix: str | None = None, all: bool = False
    ) -> dict[str, str]:
        """Cancel the selected unfinished rollouts: ``{id: disposition}``. Asking again answers the
        same; a finished or unknown id is ``not_found``."""
        if all:
            selected: Sequence[str] = list(self._entries)
        elif prefix is not None:
            selected = [rollout_id for rollout_id in self._entries if rollout_id.startswith(prefix)]
        else:
            selected = list(ids or ())
        return {rollout_id: self._cancel(rollout_id) for rollout_id in selected}

    def _cancel(self, rollout_id: str) -> str:
        entry = self._entries.get(rollout_id)
        if entry is None:
            return NOT_FOUND
        if entry.cancelled_as is not None:
            return entry.cancelled_as
        if entry.result is not None:
            return NOT_FOUND
        entry.cancelled_as = CANCELLED_QUEUED if entry.status is RolloutStatus.QUEUED else CANCELLED_RUNNING
        self._publish(
            entry,
            RolloutResultResponse(
                rollout_id=rollout_id, status=RolloutStatus.CANCELLED, err_message="cancelled"
            ),
        )
        if entry.task is not None:
            entry.task.cancel()
        return entry.cancelled_as

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

    def close(self) -> None:
        """Stop every lease and retention timer (the app is shutting down)."""
        for entry in self._entries.values():
            if entry.timer is not None:
                entry.timer.cancel()


def _lease_failure(rollout_id: str) -> RolloutResultResponse:
    return RolloutResultResponse(
        rollout_id=rollout_id,
        status=RolloutStatus.FAILURE,
        err_message="the polling lease expired: nobody polled the result in time",
        err_category=RolloutErrorCategory.LEASE_EXPIRED,
    )
