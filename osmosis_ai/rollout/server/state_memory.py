"""The shared state of a server that runs alone: nothing to share."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from osmosis_ai.rollout.server.state_shared import DEFAULT_LEASE_SECONDS, Claim


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
