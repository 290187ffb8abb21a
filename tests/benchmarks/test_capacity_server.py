"""``benchmarks/capacity_server.py``: a server of limited capacity that queues, then refuses, over real sockets."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable

import pytest

from benchmarks.capacity_server import CapacityServer, CapacityServerProcess, capacity_server, parse_schedule
from osmosis_ai._http import shared_pool
from osmosis_ai.models.concurrency import ServerLoad, parse_server_metrics

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(10_000):  # a bound on a hang, not a claim about speed
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{what} never happened")


async def test_past_the_capacity_requests_queue_and_past_twice_it_they_are_refused() -> None:
    server = CapacityServer(1, latency=30.0, jitter=0.0, retry_after=2.5)
    pool = shared_pool()
    async with capacity_server(server) as base_url:
        url = f"{base_url}/chat/completions"
        held = [asyncio.create_task(pool.request("POST", url, body=BODY, timeout=60)) for _ in range(2)]
        await _until(lambda: server.inside == 2, "two requests inside")
        metrics = await pool.request("GET", base_url.removesuffix("/v1") + "/metrics", timeout=10)
        assert parse_server_metrics(metrics.body.decode()) == ServerLoad(
            waiting=1.0, running=1.0, kv_usage=1.0, preemptions=0.0
        )
        refused = await pool.request("POST", url, body=BODY, timeout=10)
        assert refused.status == 429 and refused.retry_after == "2.5"
        assert json.loads(refused.body)["error"]["type"] == "rate_limit_exceeded"
        server.set_capacity(2)  # the one waiting in line is served now
        await _until(lambda: server.slots.running == 2, "the queued request served")
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        await _until(lambda: server.inside == 0, "the cancelled requests gone")
    assert server.stats.refused == 1 and server.stats.peak == 2


async def test_the_capacity_changes_through_the_control_endpoint() -> None:
    server = CapacityServer(4, latency=0.0)
    pool = shared_pool()
    async with capacity_server(server) as base_url:
        root = base_url.removesuffix("/v1")
        changed = await pool.request("POST", f"{root}/control", body=b'{"capacity": 9}', timeout=10)
        assert changed.status == 200 and server.slots.capacity == 9
        for bad in (b'{"capacity": 0}', b'{"capacity": "9"}', b"{}", b"not json"):
            answer = await pool.request("POST", f"{root}/control", body=bad, timeout=10)
            assert answer.status == 400 and b"whole number" in answer.body
        ok = await pool.request("POST", f"{base_url}/chat/completions", body=BODY, timeout=10)
        assert ok.status == 200 and json.loads(ok.body)["choices"][0]["message"]["content"] == "ok"
        stats = json.loads((await pool.request("GET", f"{root}/stats", timeout=10)).body)
        assert stats["capacity"] == 9 and stats["served"] == 1 and stats["refused"] == 0


async def test_without_metrics_there_is_no_metrics_page() -> None:
    async with capacity_server(CapacityServer(2, metrics=False)) as base_url:
        answer = await shared_pool().request("GET", base_url.removesuffix("/v1") + "/metrics", timeout=10)
    assert answer.status == 404


def test_a_schedule_is_seconds_and_capacities() -> None:
    assert parse_schedule("30:16, 10:8,") == [(10.0, 8), (30.0, 16)]
    for bad in ("30", "30:0", "x:8", "-1:4"):
        with pytest.raises(ValueError, match="SECONDS:CAPACITY"):
            parse_schedule(bad)


def test_the_server_runs_as_its_own_process() -> None:
    with CapacityServerProcess(2, latency=0.0) as base_url:
        request = urllib.request.Request(
            f"{base_url}/chat/completions", data=BODY, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read())["object"] == "chat.completion"
