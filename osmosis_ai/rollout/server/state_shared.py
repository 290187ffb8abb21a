"""The dedupe state several processes serving one agent share: what every backend implements.

An :class:`~osmosis_ai.rollout.server.state.AppState` is one process's view. When several processes
serve one agent (``--workers`` on a host, replicas behind a load balancer), each new dedup key is
also *claimed* in a :class:`SharedState` before its rollout starts, so a duplicate init that lands on
another process answers 202 instead of running the rollout again. A claim names its owner (one per
process); it is released when TrainGate acknowledges the result, and it counts only while its owner
is alive: owners renew a heartbeat, and a claim whose owner stopped renewing it for
``lease_seconds`` (the process died mid-run: there is no result to wait for) may be taken by the
next init, as a restarted single server runs a repeated init afresh. A restarted process adopts the
claims of the results its outbox still holds. A claim is kept for the record TTL after it was made
or last renewed; each heartbeat renews the claims of the rollouts its owner still runs, so a rollout
that outlives the TTL stays claimed, and a finished one's claim ages from its last beat like a
finished record.

The 0.3 wire keeps its rollouts there too (:class:`ResultStore`, which the SQLite and Redis
backends also implement): each admitted rollout with its owner, lease and, once finished, its
result, so any process sharing the state answers its polls, and a dead owner's unfinished ones
are answered as lost instead of forgotten (:mod:`~osmosis_ai.rollout.server.results03`). A cancel
received by any of them is decided there too: the rollout's result becomes the cancellation, its
disposition is kept for the same retention (asking again answers the same), and a counter of
cancels is raised; each process running rollouts reads that counter often, and when it moved asks
which of its unfinished rollouts were cancelled (:meth:`ResultStore.cancels_since`), and stops them.

The backends: :class:`~osmosis_ai.rollout.server.state_memory.MemoryState` (one process),
:class:`~osmosis_ai.rollout.server.state_sqlite.SqliteState` (the workers of one host),
:class:`~osmosis_ai.rollout.server.state_redis.RedisState` (replicas anywhere);
:func:`~osmosis_ai.rollout.server.state.open_state` picks one.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Claim:
    """A dedup key held by a live process: the rollout it names, and the 202 body once its init
    answered (``None`` before; ``b""`` for a claim adopted after a restart, whose body was not kept)."""

    rollout_id: str
    body: bytes | None


class SharedState(Protocol):
    """Where claims live (see the module docstring); every method may raise
    :class:`~osmosis_ai.rollout.server.errors.SharedStateUnavailable`."""

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


@dataclass(frozen=True)
class StoredRollout:
    """A 0.3 rollout as the shared state keeps it: its lease's SHA-256, its owner, its last status,
    its encoded result once there is one, when its lease ends (``time.time()``), and whether its
    owner is alive (a dead owner's unfinished rollout will never finish)."""

    digest: bytes
    owner: str
    status: str
    result: bytes | None
    lease_until: float
    owner_alive: bool


class ResultStore(Protocol):
    """Where the 0.3 wire's rollouts, results and leases live when several processes share them or
    a restart must find them (:mod:`~osmosis_ai.rollout.server.results03`). The first result stored
    for a rollout is its result. Every method may raise
    :class:`~osmosis_ai.rollout.server.errors.SharedStateUnavailable`."""

    where: str
    lease_seconds: float

    async def admit_rollout(self, rollout_id: str, digest: bytes, lease_until: float) -> bool:
        """Keep a new rollout owned by this process; ``False`` when the id is kept already."""
        ...

    async def stored_rollout(self, rollout_id: str) -> StoredRollout | None: ...

    async def progress_rollouts(self, statuses: Mapping[str, str], leases: Mapping[str, float]) -> None:
        """Record the in-flight statuses of unfinished rollouts and renew their leases (to the
        given ``time.time()``s, never shortening one), all in one write."""
        ...

    async def finish_rollout(self, rollout_id: str, status: str, result: bytes, keep_seconds: float) -> bytes:
        """Store ``result`` unless a result is stored already, kept ``keep_seconds``; the stored one."""
        ...

    async def dead_rollouts(self) -> list[str]:
        """The unfinished rollouts whose owners are dead."""
        ...

    async def prune_rollouts(self) -> None:
        """Forget the results kept past their time."""
        ...

    async def cancel_rollout(self, rollout_id: str, result: bytes, keep_seconds: float) -> str:
        """Cancel an unfinished rollout, whichever process owns it: store ``result`` (kept
        ``keep_seconds``), remember the disposition as long, raise the counter of cancels; the disposition (:data:`CANCELLED_QUEUED`, :data:`CANCELLED_RUNNING`, the
        one remembered for a rollout cancelled before, else :data:`NOT_FOUND`: unknown, finished,
        or its owner dead)."""
        ...

    async def cancellable_rollouts(self, prefix: str | None = None) -> list[str]:
        """The ids a cancel by ``prefix`` (every id with ``None``) selects: the unfinished rollouts
        and those cancelled within their retention."""
        ...

    async def cancels_since(self, seen: int, ids: Collection[str]) -> tuple[int, list[str]]:
        """The counter of cancels, and when it is not ``seen`` (the counter the last call returned)
        those of ``ids`` that are cancelled."""
        ...

    async def heartbeat(self, running: Collection[str] = ()) -> None:
        """Renew this process's liveness (:meth:`SharedState.heartbeat`)."""
        ...

    async def close(self) -> None: ...


CANCELLED_QUEUED = "cancelled_queued"
CANCELLED_RUNNING = "cancelled_running"
NOT_FOUND = "not_found"


def owner_id(pid: int | None = None) -> str:
    """The owner name of a process in a shared state: host, pid and a per-process token."""
    return f"{socket.gethostname()}/{os.getpid() if pid is None else pid}/{_TOKEN}"


_TOKEN = secrets.token_hex(4)
DEFAULT_LEASE_SECONDS = 10.0
HEARTBEATS_PER_LEASE = 4  # an owner outlives a few missed beats, not its death
