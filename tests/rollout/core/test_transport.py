"""The shared per-loop connection pool, its bound, closing, and the transport seams."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout import _transport
from osmosis_ai.rollout._transport import (
    AiohttpTransport,
    HttpxTransport,
    aclose_shared_transport,
    get_shared_transport,
    set_transport,
)
from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.config import RolloutClientSettings
from osmosis_ai.rollout.core.exceptions import OsmosisTimeoutError, OsmosisTransportError
from tests.rollout.trainer import Reply, TrainerStandIn, completion

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
async def _close_pool() -> AsyncIterator[None]:
    yield
    set_transport(None)
    await aclose_shared_transport()


def _pools_of_this_loop() -> list[AiohttpTransport]:
    loop = asyncio.get_running_loop()
    return [pool for (pool_loop, _), pool in _transport._pools.items() if pool_loop is loop]


async def test_clients_of_one_loop_share_one_pool_per_size(trainer: TrainerStandIn) -> None:
    small = RolloutClientSettings(max_connections=5)
    for rollout_id in ("a", "b", "c"):
        await OsmosisLLMClient(trainer.url, rollout_id, settings=small).chat_completions(USER)
    assert len(_pools_of_this_loop()) == 1
    await OsmosisLLMClient(
        trainer.url, "d", settings=RolloutClientSettings(max_connections=7)
    ).chat_completions(USER)
    assert sorted(pool.max_connections for pool in _pools_of_this_loop()) == [5, 7]
    assert get_shared_transport(5) is get_shared_transport(5)


async def test_pool_bounds_concurrent_connections(trainer: TrainerStandIn) -> None:
    trainer.chat_handler = lambda payload: Reply(delay=0.2, body=completion({"role": "assistant"}, 1))
    settings = RolloutClientSettings(max_connections=2)
    started = time.monotonic()
    await asyncio.gather(
        *(OsmosisLLMClient(trainer.url, f"r{i}", settings=settings).chat_completions(USER) for i in range(6))
    )
    assert time.monotonic() - started >= 0.55  # 6 requests, 2 at a time, 0.2 s each
    assert len(trainer.requests) == 6


async def test_aclose_is_idempotent_and_the_next_request_reopens(trainer: TrainerStandIn) -> None:
    client = OsmosisLLMClient(trainer.url, "r")
    await client.chat_completions(USER)
    (pool,) = _pools_of_this_loop()
    await aclose_shared_transport()
    await aclose_shared_transport()
    assert _pools_of_this_loop() == []
    assert pool._session is None
    await client.chat_completions(USER)
    assert len(_pools_of_this_loop()) == 1


def test_pools_of_finished_loops_are_dropped() -> None:
    async def open_pool() -> None:
        get_shared_transport(3)

    asyncio.run(open_pool())  # the loop ends without aclose_shared_transport()

    async def open_again() -> int:
        get_shared_transport(4)
        stale = [key for key in _transport._pools if key[0].is_closed()]
        await aclose_shared_transport()
        return len(stale)

    assert asyncio.run(open_again()) == 0


def _recording_app(seen: list[dict[str, Any]]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        seen.append({"path": scope["path"], "json": json.loads(message["body"]), "headers": headers})
        if scope["path"].endswith("/completed"):
            status, body = 200, b'{"status": "ok"}'
        else:
            status, body = 200, json.dumps(completion({"role": "assistant", "content": "asgi"}, 1)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


async def test_set_transport_routes_every_client_to_an_asgi_app() -> None:
    seen: list[dict[str, Any]] = []
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=_recording_app(seen)))
    previous = set_transport(HttpxTransport(http, owns_client=True))
    assert previous is None
    client = OsmosisLLMClient("http://traingate.test", "r-asgi", api_key="secret")
    assert (await client.chat_completions(USER)).content == "asgi"
    await client.complete_rollout("COMPLETED", USER)
    assert [s["path"] for s in seen] == ["/v1/chat/completions", "/v1/rollout/completed"]
    assert seen[0]["headers"]["authorization"] == "Bearer secret"
    assert seen[1]["json"]["rollout_id"] == "r-asgi"
    assert _pools_of_this_loop() == []
    restored = set_transport(None)
    assert isinstance(restored, HttpxTransport)
    await restored.aclose()
    assert http.is_closed


async def test_per_client_transport_argument(trainer: TrainerStandIn) -> None:
    seen: list[dict[str, Any]] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_recording_app(seen))) as http:
        transport = HttpxTransport(http)
        await OsmosisLLMClient("http://x.test", "r", transport=transport).chat_completions(USER)
        await transport.aclose()  # does not own the client: leaves it open
        assert not http.is_closed
    await OsmosisLLMClient(trainer.url, "r").chat_completions(USER)  # others still use the shared pool
    assert len(seen) == 1 and len(trainer.requests) == 1


async def test_httpx_transport_maps_errors(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(Reply(delay=2.0))
    async with httpx.AsyncClient() as http:
        transport = HttpxTransport(http)
        with pytest.raises(OsmosisTimeoutError):
            await transport.post(trainer.url + "/v1/chat/completions", b"{}", {}, 0.2, 0.2)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        with pytest.raises(OsmosisTransportError, match="ConnectError"):
            await transport.post(f"http://127.0.0.1:{port}/", b"{}", {}, 1.0, 1.0)


async def test_aiohttp_transport_returns_status_body_and_retry_after(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(Reply(status=429, body=b"slow down", headers={"Retry-After": "7"}))
    transport = AiohttpTransport(max_connections=1)
    try:
        response = await transport.post(trainer.url + "/v1/chat/completions", b"{}", {}, 5.0, 1.0)
    finally:
        await transport.aclose()
    assert response == (429, b"slow down", "7")
    assert trainer.requests[0].headers["user-agent"].startswith("osmosis-ai/")


def test_shared_pool_closes_itself_when_the_loop_shuts_down(trainer: TrainerStandIn) -> None:
    pools: list[AiohttpTransport] = []

    async def forgetful_user() -> None:  # never calls aclose_shared_transport()
        await OsmosisLLMClient(trainer.url, "r").chat_completions(USER)
        pools.extend(_pools_of_this_loop())
        assert pools[0]._session is not None

    asyncio.run(forgetful_user())
    assert len(pools) == 1
    assert pools[0]._session is None


async def test_callbacks_beyond_the_pool_wait_at_the_gate_and_their_timeout_starts_there(
    trainer: TrainerStandIn,
) -> None:
    delay = 0.2
    trainer.chat_handler = lambda payload: Reply(delay=delay, body=completion({"role": "assistant"}, 1))
    settings = RolloutClientSettings(max_connections=2, max_retries=0)
    # 10 calls, 2 at a time: the last pair waits ~0.8 s for a slot, longer than its 0.6 s timeout.
    clients = [
        OsmosisLLMClient(trainer.url, f"r{i}", timeout_seconds=0.6, settings=settings) for i in range(10)
    ]
    results = await asyncio.gather(*(client.chat_completions(USER) for client in clients))
    assert len(results) == 10
    arrivals = sorted(request.at for request in trainer.chat_requests)
    assert len(arrivals) == 10
    assert arrivals[1] - arrivals[0] < delay  # two slots: the first two are served side by side
    # Each request is held `delay` by the trainer, so a third one inside that window would mean
    # three at once; 10 ms of slack for the trainer's timer firing early.
    assert all(later - first >= delay - 0.01 for first, later in zip(arrivals, arrivals[2:], strict=False))


async def test_a_cancelled_callback_gives_its_slot_back(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(Reply(delay=5.0))  # the holder's; later requests get the default answer
    transport = AiohttpTransport(max_connections=1)
    url = trainer.url + "/v1/chat/completions"
    try:
        holder = asyncio.create_task(transport.post(url, b"{}", {}, 10.0, 1.0))
        queued = asyncio.create_task(transport.post(url, b"{}", {}, 10.0, 1.0))
        await asyncio.sleep(0.2)
        assert len(trainer.requests) == 1  # the second waits at the gate, not on the wire
        queued.cancel()
        holder.cancel()
        response = await asyncio.wait_for(transport.post(url, b"{}", {}, 10.0, 1.0), 3.0)
    finally:
        await transport.aclose()
    assert response.status == 200
    assert len(trainer.requests) == 2  # the cancelled waiter never reached the trainer


def _unanswering_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A listener whose accept queue is full, so that a new TCP connection never completes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    return listener, fillers


async def test_connect_timeout_still_bounds_opening_a_connection() -> None:
    listener, fillers = _unanswering_listener()
    transport = AiohttpTransport(max_connections=1)
    port = listener.getsockname()[1]
    started = time.monotonic()
    try:
        with pytest.raises(OsmosisTimeoutError, match="no answer"):
            await transport.post(f"http://127.0.0.1:{port}/", b"{}", {}, 30.0, 0.3)
    finally:
        await transport.aclose()
        for sock in (listener, *fillers):
            sock.close()
    assert time.monotonic() - started < 5.0
