"""The dedupe state shared by processes (``state.py``): the one contract of its SQLite and Redis
implementations, a rollout that outlives the record TTL, then replicas sharing a real Redis, through
its outage and its return."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from osmosis_ai.rollout.config.settings import RolloutSettings
from osmosis_ai.rollout.server.app import create_app
from osmosis_ai.rollout.server.state import (
    Claim,
    RedisState,
    SharedState,
    SharedStateUnavailable,
    SqliteState,
    open_state,
    owner_id,
)
from osmosis_ai.rollout.server.state_shared import ResultStore
from tests.support.redis_server import RedisServer
from tests.support.server import RunningServer, ScriptedAgent, fast_config, fast_settings, init_body
from tests.support.trainer import Reply, TrainerStandIn, completion
from tests.support.waiting import wait_until

Opened = Callable[[str], SharedState]


@pytest.fixture(params=["sqlite", "redis"])
async def two_owners(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SharedState, ...]]:
    """Two processes' views of one shared state (owners of two pids of this host)."""
    if request.param == "sqlite":
        path = str(tmp_path / "state.sqlite3")
        stores: tuple[SharedState, ...] = tuple(
            SqliteState(path, owner=f"{socket.gethostname()}/{pid}/t") for pid in (101, 102)
        )
    else:
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        stores = tuple(RedisState(redis_server.url, owner=f"replica-{n}") for n in (1, 2))
    for store in stores:
        await store.heartbeat()
    yield stores
    for store in stores:
        await store.close()


async def test_a_key_is_claimed_once_and_its_answer_reaches_the_other_owner(two_owners):
    first, second = two_owners
    assert await first.claim("k", "r-1") is None
    assert await second.claim("k", "r-other") == Claim("r-1", None)  # the answer is not stored yet
    await first.answered("k", b'{"rollout_id":"r-1","tools":[]}')
    assert await second.claim("k", "r-other") == Claim("r-1", b'{"rollout_id":"r-1","tools":[]}')
    await second.release("k")  # not its claim: nothing happens
    assert await second.lookup("k") == Claim("r-1", b'{"rollout_id":"r-1","tools":[]}')
    await first.release("k")  # acknowledged: a repeated init runs afresh
    assert await second.lookup("k") is None
    assert await second.claim("k", "r-2") is None


async def test_a_dead_owner_holds_nothing_and_a_restarted_one_adopts_its_results(two_owners):
    first, second = two_owners
    assert await first.claim("running", "r-run") is None
    assert await first.claim("pending", "r-pend") is None
    await first.close()  # it stopped: its running rollout has no result to wait for
    assert await second.claim("running", "r-again") is None
    await second.adopt({"pending": "r-pend"})  # its outbox holds that result
    assert await second.lookup("pending") == Claim("r-pend", b"")  # answered with the finder's own tools


@pytest.fixture(params=["sqlite", "redis"])
async def result_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ResultStore, ...]]:
    """Two live processes' views of one store of 0.3 rollouts (on another host, for SQLite: alive
    while they beat)."""
    stores: tuple[ResultStore, ...]
    if request.param == "sqlite":
        path = str(tmp_path / "state.sqlite3")
        stores = tuple(SqliteState(path, owner=f"elsewhere/{pid}/t") for pid in (101, 102))
    else:
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        stores = tuple(RedisState(redis_server.url, owner=f"replica-{n}") for n in (1, 2))
    for store in stores:
        await store.heartbeat()
    yield stores
    for store in stores:
        await store.close()


async def test_a_cancel_is_decided_in_the_store_once_and_its_owner_finds_it(result_stores):
    owner, other = result_stores
    lease = time.time() + 60
    for rollout_id in ("r-run", "r-queued", "r-done"):
        assert await owner.admit_rollout(rollout_id, b"digest", lease)
    await owner.progress_rollouts({"r-run": "running"}, {"r-run": lease + 1})
    await owner.finish_rollout("r-done", "success", b"done", 60)
    # a finished rollout keeps its status; a lease is never shortened
    await owner.progress_rollouts({"r-done": "running"}, {"r-queued": lease - 30, "r-done": lease + 5})
    run, queued, done = [await other.stored_rollout(i) for i in ("r-run", "r-queued", "r-done")]
    assert run is not None and (run.status, run.lease_until) == ("running", lease + 1)
    assert queued is not None and (queued.status, queued.lease_until) == ("queued", lease)
    assert done is not None and (done.status, done.lease_until) == ("success", lease)
    seen, cancelled = await owner.cancels_since(-1, ["r-run", "r-queued"])
    assert cancelled == []
    assert sorted(await other.cancellable_rollouts("r-")) == ["r-queued", "r-run"]
    assert await other.cancel_rollout("r-run", b"cancelled", 60) == "cancelled_running"
    assert await other.cancel_rollout("r-run", b"again", 60) == "cancelled_running"  # remembered
    assert await owner.cancel_rollout("r-queued", b"cancelled", 60) == "cancelled_queued"
    assert await other.cancel_rollout("r-done", b"cancelled", 60) == "not_found"  # finished
    assert await other.cancel_rollout("never-admitted", b"cancelled", 60) == "not_found"
    counter, cancelled = await owner.cancels_since(seen, ["r-run", "r-queued", "r-elsewhere"])
    assert sorted(cancelled) == ["r-queued", "r-run"]
    assert await owner.cancels_since(counter, ["r-run"]) == (counter, [])  # nothing since
    stored = await owner.stored_rollout("r-run")
    assert stored is not None and (stored.status, stored.result) == ("cancelled", b"cancelled")
    assert await owner.finish_rollout("r-run", "success", b"late", 60) == b"cancelled"  # the first result
    assert sorted(await other.cancellable_rollouts(None)) == ["r-queued", "r-run"]  # cancelled, kept
    assert await owner.admit_rollout("r-orphan", b"digest", lease)
    await owner.close()  # its owner is gone: nothing runs it to cancel
    assert await other.cancel_rollout("r-orphan", b"cancelled", 60) == "not_found"


async def test_the_supervisor_declares_a_dead_worker_at_once(tmp_path: Path):
    path = str(tmp_path / "state.sqlite3")
    worker = SqliteState(path, owner=owner_id(4242))
    other = SqliteState(path, owner=owner_id(4343))
    assert await worker.claim("k", "r") is None
    assert await other.claim("k", "r") == Claim("r", None)
    supervisor = SqliteState(path)
    supervisor.forget_process(4242)
    assert await other.claim("k", "r") is None
    for store in (worker, other, supervisor):
        await store.close()


async def test_an_unreachable_redis_is_a_typed_error(redis_server: RedisServer):
    store = RedisState(redis_server.url)
    redis_server.stop()
    with pytest.raises(SharedStateUnavailable, match="is unreachable"):
        await store.claim("k", "r")
    redis_server.start()
    assert await store.claim("k", "r") is None  # the same client recovers
    await store.close()


# -- replicas on two ports sharing the state ---------------------------------------------------------


def _gated(trainer: TrainerStandIn, gate: threading.Event) -> None:
    def handler(payload: dict) -> Reply:
        message = {"role": "assistant", "content": "The answer is #### 3"}
        return Reply(body=completion(message, len(payload["messages"]), payload["rollout_id"]), gate=gate)

    trainer.chat_handler = handler


def _runs(trainer: TrainerStandIn, rollout_id: str) -> int:
    return sum(1 for r in trainer.chat_requests if r.json and r.json.get("rollout_id") == rollout_id)


async def test_replicas_sharing_redis_run_each_rollout_once_through_an_outage(
    redis_server: RedisServer, trainer: TrainerStandIn
):
    gate = threading.Event()
    _gated(trainer, gate)
    agents = [ScriptedAgent(), ScriptedAgent()]
    replicas = [RunningServer(create_app(agent, config=fast_config(state=redis_server.url))).start()
                for agent in agents]  # fmt: skip
    try:
        async with httpx.AsyncClient(timeout=10) as http:

            async def init(replica: int, rollout_id: str, **extra: str) -> httpx.Response:
                body = init_body(rollout_id, trainer.url, **extra)
                return await http.post(f"{replicas[replica].url}/v1/rollout/init", json=body)

            answers = await asyncio.gather(*(init(n % 2, "dup") for n in range(20)))
            assert {(a.status_code, a.json()["rollout_id"]) for a in answers} == {(202, "dup")}
            assert (await init(1, "dup-other-id", idempotency_key="dup")).status_code == 202
            assert (await init(0, "during")).status_code == 202
            wait_until(
                lambda: _runs(trainer, "dup") and _runs(trainer, "during"), what="both rollouts running"
            )

            redis_server.stop()  # mid-run
            refused = await asyncio.gather(*(init(n % 2, f"new-{n}") for n in range(4)))
            assert {a.status_code for a in refused} == {503}
            assert all(a.headers["retry-after"] == "1" for a in refused)
            for replica in replicas:  # a load balancer reads the status code
                health = await http.get(f"{replica.url}/health")
                assert health.status_code == 503 and health.json()["status"] == "degraded"
                assert redis_server.url.split("@")[-1].split("/")[0] in health.json()["degraded_reason"]
            late_duplicate = await init(1, "during")  # another replica's rollout: cannot be checked now
            assert late_duplicate.status_code == 503
            gate.set()
            trainer.wait_completed("dup")
            trainer.wait_completed("during")

            redis_server.start()
            recovered = await init(1, "after")
            assert recovered.status_code == 202
            health = await http.get(f"{replicas[1].url}/health")
            assert health.status_code == 200 and health.json()["status"] == "healthy"
            trainer.wait_completed("after")
            assert (await init(0, "during")).status_code == 202  # still answered from its claim
    finally:
        for replica in replicas:
            replica.stop()
    assert [_runs(trainer, r) for r in ("dup", "during", "after")] == [1, 1, 1]
    assert not any(_runs(trainer, f"new-{n}") for n in range(4))
    assert len([r for r in trainer.completed_requests if r.json["rollout_id"] == "dup"]) == 1
    assert sum(agent.get_tools_calls for agent in agents) >= 3


@pytest.fixture(params=["sqlite", "redis"])
def shared_where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where two replicas' shared state lives: an SQLite file, or a real Redis."""
    if request.param == "sqlite":
        return str(tmp_path / "state.sqlite3")
    redis_server: RedisServer = request.getfixturevalue("redis_server")
    return redis_server.url


async def _gone(store: SharedState, key: str) -> None:
    async with asyncio.timeout(15):  # a bound on a hang: the claim goes one record TTL after it was made
        while await store.lookup(key) is not None:
            await asyncio.sleep(0.01)


async def test_a_rollout_that_outlives_the_record_ttl_stays_claimed_until_it_ends(
    shared_where: str, trainer: TrainerStandIn
):
    gate = threading.Event()
    _gated(trainer, gate)
    ttl = 2.0  # beats come a quarter of that apart: on a loaded machine one may be 1.5 s late
    agents = [ScriptedAgent(), ScriptedAgent()]
    settings = fast_settings(record_ttl_seconds=ttl)
    held = settings.client.model_copy(update={"timeout_seconds": 60.0})  # the gated chat call is not retried
    config = fast_config(RolloutSettings(client=held, server=settings.server), state=shared_where)
    replicas = [RunningServer(create_app(agent, config=config)).start() for agent in agents]
    witness = open_state(shared_where, record_ttl_seconds=ttl, owner="witness")
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            first = await http.post(f"{replicas[0].url}/v1/rollout/init", json=init_body("long", trainer.url))
            assert first.status_code == 202
            wait_until(lambda: _runs(trainer, "long"), what="the rollout running")
            # A claim made after the rollout's and never renewed: once it has expired, so would have
            # the rollout's own claim without its owner's renewals.
            assert await witness.claim("witness", "w") is None
            await _gone(witness, "witness")
            assert await witness.lookup("long") == Claim("long", first.content)

            again = await http.post(f"{replicas[1].url}/v1/rollout/init", json=init_body("long", trainer.url))
            assert (again.status_code, again.json()["rollout_id"]) == (202, "long")
            assert (await http.get(f"{replicas[1].url}/health")).json()["active_rollouts"] == 0
            gate.set()
            assert trainer.wait_completed("long")["status"] == "COMPLETED"
            await _gone(witness, "long")  # acknowledged: released
    finally:
        await witness.close()
        for replica in replicas:
            replica.stop()
    assert _runs(trainer, "long") == 1
    assert len([r for r in trainer.completed_requests if r.json["rollout_id"] == "long"]) == 1
    assert [agent.get_tools_calls for agent in agents] == [1, 0]  # answered from the claim


def test_a_mistyped_url_or_a_missing_directory_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    from osmosis_ai.rollout.core.exceptions import RolloutValueError
    from osmosis_ai.rollout.server.config import ServerConfig
    from osmosis_ai.rollout.server.errors import SharedStateUnavailable

    with pytest.raises(
        RolloutValueError, match=r"^the state 'redis:/bad' looks like a URL but is not a Redis one"
    ):
        open_state("redis:/bad")
    with pytest.raises(RolloutValueError, match="expected two slashes after 'redis:': redis://HOST:PORT/DB"):
        ServerConfig(state="redis:/bad")
    missing = tmp_path / "missing" / "state.sqlite3"
    with pytest.raises(SharedStateUnavailable, match=r"the directory .*missing does not exist"):
        open_state(str(missing))
    assert not missing.parent.exists()
    asyncio.run(open_state(str(tmp_path / "state.sqlite3")).close())  # a file in a directory that exists
