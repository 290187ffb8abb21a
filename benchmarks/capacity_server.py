"""A model server of limited capacity, OpenAI-compatible, for the adaptive-concurrency benchmark.

    python -m benchmarks.capacity_server [--capacity 32] [--latency 0.1] [--schedule 30:16,60:32]

It serves ``POST /v1/chat/completions`` the way a continuous-batching server behaves from outside:
at most ``capacity`` requests are served at once, each for about ``latency`` seconds (``--jitter``
spreads it uniformly); the next ones wait in line, so latency grows past the capacity; a request
that finds ``--refuse-past`` times the capacity (2) already inside is refused at once with 429 and
``Retry-After`` (0: never refused, so capacity shows only as latency rising). With
``--batch-slowdown s`` a request admitted beside ``r`` others is served ``1 + s * r / capacity``
times slower, as a batch step slows with the batch: latency rises well before the capacity. The
client is never told the capacity. ``GET /metrics`` answers vLLM's load figures (requests running
and waiting, KV-cache use as running over capacity, preemptions: none) unless ``--no-metrics``.

The capacity changes mid-run with ``POST /control {"capacity": n}`` or on a ``--schedule`` of
``seconds:capacity`` pairs counted from the start; ``GET /stats`` tells what it served and refused.
The first line on stdout is the port. :class:`CapacityServerProcess` runs it in a child process for a
``with`` block (the benchmark, so its CPU is not the client's); :func:`capacity_server` runs it on
the current event loop (the end-to-end test).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from benchmarks.openai_stub import ServerProcess

MODEL = "capacity-stand-in"


@dataclass
class Capacity:
    """``capacity`` service slots handed out in arrival order; the capacity may change any time."""

    capacity: int
    running: int = 0
    _line: deque[asyncio.Future[None]] = field(default_factory=deque)

    @property
    def waiting(self) -> int:
        return sum(1 for waiter in self._line if not waiter.done())

    async def enter(self) -> None:
        if self.running < self.capacity and not self._line:
            self.running += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.leave()  # admitted, but the client left
            raise

    def leave(self) -> None:
        self.running -= 1
        self._admit()

    def resize(self, capacity: int) -> None:
        self.capacity = capacity
        self._admit()

    def _admit(self) -> None:
        while self._line and self.running < self.capacity:
            waiter = self._line.popleft()
            if not waiter.done():
                self.running += 1
                waiter.set_result(None)


@dataclass
class Stats:
    served: int = 0
    refused: int = 0
    peak: int = 0  # the most requests inside at once


class CapacityServer:
    """The server's state and its aiohttp application."""

    def __init__(
        self,
        capacity: int,
        *,
        latency: float = 0.1,
        jitter: float = 0.2,
        retry_after: float = 1.0,
        refuse_past: float = 2.0,
        batch_slowdown: float = 0.0,
        metrics: bool = True,
        seed: int = 1,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"the capacity must be at least 1, got {capacity}")
        if refuse_past < 0:
            raise ValueError(f"--refuse-past must be 0 (never) or a positive multiple, got {refuse_past:g}")
        self.slots = Capacity(capacity)
        self.latency = latency
        self.jitter = jitter
        self.retry_after = retry_after
        self.refuse_past = refuse_past
        self.batch_slowdown = batch_slowdown
        self.metrics = metrics
        self.stats = Stats()
        self.inside = 0
        self._random = random.Random(seed)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_post("/control", self._control)
        app.router.add_get("/stats", self._stats)
        if self.metrics:
            app.router.add_get("/metrics", self._metrics)
        return app

    def set_capacity(self, capacity: int) -> None:
        self.slots.resize(capacity)

    async def _chat(self, request: web.Request) -> web.Response:
        payload = await request.json()
        if self.refuse_past and self.inside >= self.refuse_past * self.slots.capacity:
            self.stats.refused += 1
            hint = f"{self.retry_after:g}"
            body = {"error": {"message": "over capacity, retry later", "type": "rate_limit_exceeded"}}
            return web.json_response(body, status=429, headers={"Retry-After": hint})
        self.inside += 1
        self.stats.peak = max(self.stats.peak, self.inside)
        try:
            await self.slots.enter()
            try:
                batch = 1 + self.batch_slowdown * (self.slots.running - 1) / self.slots.capacity
                await asyncio.sleep(
                    batch * self.latency * self._random.uniform(1 - self.jitter, 1 + self.jitter)
                )
            finally:
                self.slots.leave()
        finally:
            self.inside -= 1
        self.stats.served += 1
        return web.json_response(_completion(str(payload.get("model", MODEL))))

    async def _control(self, request: web.Request) -> web.Response:
        try:
            capacity = (await request.json())["capacity"]
            if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": 'send {"capacity": n} with n a whole number >= 1'}, status=400)
        self.set_capacity(capacity)
        return web.json_response({"capacity": capacity})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "capacity": self.slots.capacity,
                "inside": self.inside,
                "running": self.slots.running,
                "served": self.stats.served,
                "refused": self.stats.refused,
                "peak": self.stats.peak,
            }
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        running, waiting = self.slots.running, self.slots.waiting
        figures = (
            ("vllm:num_requests_running", "gauge", "Requests being served.", running),
            ("vllm:num_requests_waiting", "gauge", "Requests waiting to be served.", waiting),
            (
                "vllm:kv_cache_usage_perc",
                "gauge",
                "KV-cache usage, 1 is full.",
                min(running / self.slots.capacity, 1.0),
            ),
            ("vllm:num_preemptions_total", "counter", "Preemptions so far.", 0),
        )
        lines = []
        for name, kind, text, value in figures:
            lines += [
                f"# HELP {name} {text}",
                f"# TYPE {name} {kind}",
                f'{name}{{model_name="{MODEL}"}} {float(value)}',
            ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")


def _completion(model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-capacity",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }


@contextlib.asynccontextmanager
async def capacity_server(server: CapacityServer, port: int = 0) -> AsyncIterator[str]:
    """Serve ``server`` on loopback (``port`` 0: a free one) from the running loop; yields its ``/v1`` URL."""
    # A client that leaves takes its request along, as vLLM aborts a request whose client went away.
    runner = web.AppRunner(server.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    await web.SockSite(runner, listener).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        await runner.cleanup()


def parse_schedule(text: str) -> list[tuple[float, int]]:
    """``"30:16,60:32"`` as ``[(30.0, 16), (60.0, 32)]``."""
    steps = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        at, sep, capacity = part.partition(":")
        try:
            step = (float(at), int(capacity))
        except ValueError:
            step = (-1.0, 0)
        if not sep or step[0] < 0 or step[1] < 1:
            raise ValueError(f"a schedule step is SECONDS:CAPACITY with CAPACITY >= 1, got {part!r}")
        steps.append(step)
    return sorted(steps)


async def _serve(server: CapacityServer, port: int, schedule: list[tuple[float, int]]) -> None:
    async with capacity_server(server, port) as base_url:
        print(urlsplit(base_url).port, flush=True)
        start = time.monotonic()
        for at, capacity in schedule:
            await asyncio.sleep(max(0.0, start + at - time.monotonic()))
            server.set_capacity(capacity)
        await asyncio.Event().wait()


class CapacityServerProcess(ServerProcess):
    """The server in a child process; ``with CapacityServerProcess(32) as base_url:`` gives its ``/v1`` URL."""

    def __init__(
        self,
        capacity: int,
        *,
        latency: float = 0.1,
        jitter: float = 0.2,
        refuse_past: float = 2.0,
        batch_slowdown: float = 0.0,
        metrics: bool = True,
    ) -> None:
        arguments = [
            f"--batch-slowdown={batch_slowdown}",
            f"--capacity={capacity}",
            f"--latency={latency}",
            f"--jitter={jitter}",
            f"--refuse-past={refuse_past}",
        ]
        if not metrics:
            arguments.append("--no-metrics")
        super().__init__("benchmarks.capacity_server", *arguments, name="the capacity server")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=32, help="requests served at once")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds each request is served")
    parser.add_argument("--jitter", type=float, default=0.2, help="service time spread, +- this share")
    parser.add_argument("--retry-after", type=float, default=1.0, help="the Retry-After of a 429, seconds")
    parser.add_argument(
        "--refuse-past", type=float, default=2.0, help="429 past this many times the capacity inside; 0 never"
    )
    parser.add_argument(
        "--batch-slowdown",
        type=float,
        default=0.0,
        help="service time x (1 + this x others running / capacity)",
    )
    parser.add_argument("--no-metrics", action="store_true", help="no /metrics page")
    parser.add_argument("--schedule", default="", help="SECONDS:CAPACITY,... capacity changes from the start")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()
    try:
        schedule = parse_schedule(args.schedule)
        server = CapacityServer(
            args.capacity,
            latency=args.latency,
            jitter=args.jitter,
            retry_after=args.retry_after,
            refuse_past=args.refuse_past,
            batch_slowdown=args.batch_slowdown,
            metrics=not args.no_metrics,
            seed=args.seed,
        )
    except ValueError as exc:
        parser.error(str(exc))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(server, args.port, schedule))


if __name__ == "__main__":
    main()
