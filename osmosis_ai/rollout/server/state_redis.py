"""The shared state of replicas on any number of hosts: Redis (``redis://HOST:PORT/DB``)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Awaitable, Collection, Mapping
from typing import Any, TypeVar

from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.state_shared import DEFAULT_LEASE_SECONDS, Claim, StoredRollout, owner_id

T = TypeVar("T")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
# A scheme of two letters or more and a colon: a URL, or a mistyped one ("redis:/host"); one letter
# and a colon is a Windows drive.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def check_location(where: str) -> None:
    """Refuse a state location that looks like a URL but is not a Redis one (``redis:/host``,
    ``http://...``), which would otherwise be taken for an SQLite file of that name."""
    scheme = _SCHEME.match(where)
    if where.startswith(REDIS_SCHEMES) or where == ":memory:" or scheme is None:
        return
    expected = "redis://HOST:PORT/DB, rediss://HOST:PORT/DB or unix:///PATH, or an SQLite file path"
    if f"{scheme.group(0).lower()}//" in REDIS_SCHEMES:
        expected = f"two slashes after {scheme.group(0)!r}: {expected}"
    raise RolloutValueError(
        f"the state {where!r} looks like a URL but is not a Redis one: expected {expected}"
    )


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

# The 0.3 wire's rollouts: a hash each (digest, owner, status, lease, and result once finished: then
# it expires after its retention), and the set of the unfinished ones' ids (ARGV[1]/KEYS[2]).
# KEYS[1]: the rollout, KEYS[2]: the open set; ARGV: id, digest, owner, lease
_REDIS_ADMIT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'digest', ARGV[2], 'owner', ARGV[3], 'status', 'queued', 'lease', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""
# KEYS[1]: the rollout; ARGV: owner-key prefix
_REDIS_STORED = """
local r = redis.call('HMGET', KEYS[1], 'digest', 'owner', 'status', 'result', 'lease')
if not r[1] then return false end
r[6] = redis.call('EXISTS', ARGV[1] .. r[2])
return r
"""
# KEYS[1]: the rollout; ARGV: field, value ('lease' keeps the later one)
_REDIS_UNFINISHED_SET = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'result') == 1 then return 0 end
if ARGV[1] == 'lease' and tonumber(redis.call('HGET', KEYS[1], 'lease')) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
# KEYS[1]: the rollout, KEYS[2]: the open set; ARGV: id, status, result, keep ms
_REDIS_FINISH = """
redis.call('SREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return ARGV[3] end
local kept = redis.call('HGET', KEYS[1], 'result')
if kept then return kept end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return ARGV[3]
"""
# KEYS[1]: the open set; ARGV: rollout-key prefix, owner-key prefix, this owner
_REDIS_DEAD = """
local dead = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local owner = redis.call('HGET', ARGV[1] .. id, 'owner')
  if not owner then
    redis.call('SREM', KEYS[1], id)
  elseif owner ~= ARGV[3] and redis.call('EXISTS', ARGV[2] .. owner) == 0 then
    dead[#dead + 1] = id
  end
end
return dead
"""

# A cancel: the disposition is a key of its own (kept as long as the result), the id is also in a
# sorted set by the time it is forgotten (what a cancel by prefix or all selects), and the counter
# of cancels is raised.
# KEYS[1]: the rollout, KEYS[2]: the open set, KEYS[3]: the disposition, KEYS[4]: the cancelled set,
# KEYS[5]: the counter; ARGV: id, result, keep ms, owner-key prefix, this owner, now ms
_REDIS_CANCEL = """
local before = redis.call('GET', KEYS[3])
if before then return before end
local r = redis.call('HMGET', KEYS[1], 'owner', 'status', 'result')
if not r[1] or r[3] then return 'not_found' end
if r[1] ~= ARGV[5] and redis.call('EXISTS', ARGV[4] .. r[1]) == 0 then return 'not_found' end
local disposition = 'cancelled_running'
if r[2] == 'queued' then disposition = 'cancelled_queued' end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'result', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], disposition, 'PX', ARGV[3])
redis.call('ZADD', KEYS[4], tonumber(ARGV[6]) + tonumber(ARGV[3]), ARGV[1])
redis.call('INCR', KEYS[5])
return disposition
"""
# KEYS[1]: the open set, KEYS[2]: the cancelled set; ARGV: now ms
_REDIS_CANCELLABLE = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
local ids = redis.call('SMEMBERS', KEYS[1])
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do ids[#ids + 1] = id end
return ids
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
    rollout03_prefix = "osmosis:rollout03:"
    open03 = "osmosis:rollouts03:open"
    cancelled03 = "osmosis:rollouts03:cancelled"
    disposition03_prefix = "osmosis:cancelled03:"
    cancels03 = "osmosis:rollouts03:cancels"

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
        self._admit03 = self._redis.register_script(_REDIS_ADMIT)
        self._stored03 = self._redis.register_script(_REDIS_STORED)
        self._set03 = self._redis.register_script(_REDIS_UNFINISHED_SET)
        self._finish03 = self._redis.register_script(_REDIS_FINISH)
        self._dead03 = self._redis.register_script(_REDIS_DEAD)
        self._cancel03 = self._redis.register_script(_REDIS_CANCEL)
        self._cancellable03 = self._redis.register_script(_REDIS_CANCELLABLE)

    async def _run(self, action: Awaitable[T]) -> T:
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

    # -- the 0.3 wire's rollouts (ResultStore) ---------------------------------------------------------

    async def admit_rollout(self, rollout_id: str, digest: bytes, lease_until: float) -> bool:
        keys = [self.rollout03_prefix + rollout_id, self.open03]
        args: list[str | bytes] = [rollout_id, digest, self.owner, repr(lease_until)]
        return bool(await self._run(self._admit03(keys=keys, args=args)))

    async def stored_rollout(self, rollout_id: str) -> StoredRollout | None:
        reply = await self._run(
            self._stored03(keys=[self.rollout03_prefix + rollout_id], args=[self.owner_prefix])
        )
        if not reply:
            return None
        digest, owner, status, result, lease, alive = reply
        owner = owner.decode()
        return StoredRollout(
            digest, owner, status.decode(), result, float(lease), bool(alive) or owner == self.owner
        )

    async def progress_rollouts(self, statuses: Mapping[str, str], leases: Mapping[str, float]) -> None:
        changes = [(rollout_id, "status", status) for rollout_id, status in statuses.items()]
        changes += [(rollout_id, "lease", repr(lease_until)) for rollout_id, lease_until in leases.items()]
        if not changes:
            return

        async def progress() -> None:
            async with self._redis.pipeline(transaction=False) as pipe:
                for rollout_id, name, value in changes:
                    await self._set03(
                        keys=[self.rollout03_prefix + rollout_id], args=[name, value], client=pipe
                    )
                await pipe.execute()

        await self._run(progress())

    async def finish_rollout(self, rollout_id: str, status: str, result: bytes, keep_seconds: float) -> bytes:
        keys = [self.rollout03_prefix + rollout_id, self.open03]
        args: list[str | bytes] = [rollout_id, status, result, str(max(1, int(keep_seconds * 1000)))]
        kept: bytes = await self._run(self._finish03(keys=keys, args=args))
        return kept

    async def dead_rollouts(self) -> list[str]:
        args = [self.rollout03_prefix, self.owner_prefix, self.owner]
        reply = await self._run(self._dead03(keys=[self.open03], args=args))
        return [rollout_id.decode() for rollout_id in reply]

    async def prune_rollouts(self) -> None:
        # a finished rollout's hash and a cancel's disposition expire on their own; the sorted set of
        # cancelled ids is pruned by its scores
        now = int(time.time() * 1000)
        await self._run(self._redis.zremrangebyscore(self.cancelled03, "-inf", now))

    async def cancel_rollout(self, rollout_id: str, result: bytes, keep_seconds: float) -> str:
        keys = [self.rollout03_prefix + rollout_id, self.open03, self.disposition03_prefix + rollout_id,
                self.cancelled03, self.cancels03]  # fmt: skip
        keep_ms = max(1, int(keep_seconds * 1000))
        args: list[str | bytes] = [rollout_id, result, str(keep_ms), self.owner_prefix, self.owner,
                                   str(int(time.time() * 1000))]  # fmt: skip
        disposition: bytes = await self._run(self._cancel03(keys=keys, args=args))
        return disposition.decode()

    async def cancellable_rollouts(self, prefix: str | None = None) -> list[str]:
        now = str(int(time.time() * 1000))
        reply = await self._run(self._cancellable03(keys=[self.open03, self.cancelled03], args=[now]))
        ids = {rollout_id.decode() for rollout_id in reply}
        return sorted(ids if prefix is None else {i for i in ids if i.startswith(prefix)})

    async def cancels_since(self, seen: int, ids: Collection[str]) -> tuple[int, list[str]]:
        counter = int(await self._run(self._redis.get(self.cancels03)) or 0)
        wanted = list(ids)
        if counter == seen or not wanted:
            return counter, []
        found = await self._run(self._redis.mget([self.disposition03_prefix + i for i in wanted]))
        return counter, [
            rollout_id for rollout_id, disposition in zip(wanted, found, strict=True) if disposition
        ]

    async def close(self) -> None:
        with contextlib.suppress(*self._errors):
            await self._redis.delete(self.owner_prefix + self.owner)
        with contextlib.suppress(*self._errors):
            await self._redis.aclose()
