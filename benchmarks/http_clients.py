"""aiohttp vs httpx as the rollout client's transport: requests/s of concurrent JSON POSTs.

Run: ``.venv/bin/python -m benchmarks.http_clients [--requests N] [--rounds N] [--loop uvloop|asyncio]``

A local aiohttp server (a separate process, so it does not share the client's core) answers every
POST with a TrainGate-sized chat completion. Each client posts a chat-completions-sized JSON body and
parses the JSON reply, at concurrency 50 and 200, through one shared pool sized to the concurrency,
the way ``osmosis_ai._http`` pools them. One table, both libraries, same run; the last
column is ``OsmosisLLMClient.chat_completions`` itself (aiohttp underneath), to show its own overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import time
from collections.abc import Awaitable, Callable

from osmosis_ai._sockets import bind_listener

MESSAGES = [
    {"role": "system", "content": "You are a calculator. Answer as '#### <number>'."},
    {"role": "user", "content": "What is 12 + 7?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "add", "arguments": '{"a": 12, "b": 7}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c0", "content": "19"},
]
REQUEST = json.dumps(
    {
        "model": "default",
        "messages": MESSAGES,
        "rollout_id": "bench",
        "temperature": 1.0,
        "top_p": 1.0,
        "max_tokens": 512,
        "logprobs": True,
    },
    separators=(",", ":"),
).encode()
REPLY = json.dumps(
    {
        "id": "cmpl",
        "object": "chat.completion",
        "created": 0,
        "model": "default",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "The answer is #### 19"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
        "token_ids": list(range(8)),
        "logprobs": [-0.1] * 8,
    },
).encode()
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer bench-secret"}


def _serve(sock: socket.socket) -> None:
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=REPLY, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    web.run_app(app, sock=sock, print=None, access_log=None, handle_signals=True)


async def _drive(post: Callable[[], Awaitable[None]], total: int, concurrency: int) -> float:
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await post()

    for _ in range(concurrency):  # warm the pool: one request per connection
        await post()
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - start)


async def bench_aiohttp(url: str, total: int, concurrency: int) -> float:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def post() -> None:
            async with session.post(url, data=REQUEST, headers=HEADERS, timeout=timeout) as resp:
                json.loads(await resp.read())

        return await _drive(post, total, concurrency)


async def bench_httpx(url: str, total: int, concurrency: int) -> float:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0)) as client:

        async def post() -> None:
            resp = await client.post(url, content=REQUEST, headers=HEADERS)
            json.loads(resp.content)

        return await _drive(post, total, concurrency)


async def bench_osmosis_client(url: str, total: int, concurrency: int) -> float:
    """The full client path: body building, encoding, retry policy and parsing over the shared pool."""
    from osmosis_ai._http import aclose_shared_transport
    from osmosis_ai.rollout.client import OsmosisLLMClient
    from osmosis_ai.rollout.config import RolloutClientSettings

    server_url = url.removesuffix("/v1/chat/completions")
    client = OsmosisLLMClient(
        server_url,
        "bench",
        api_key="bench-secret",
        settings=RolloutClientSettings(max_connections=concurrency),
    )

    async def post() -> None:
        await client.chat_completions(MESSAGES, max_tokens=512)

    try:
        return await _drive(post, total, concurrency)
    finally:
        await aclose_shared_transport()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6000, help="requests per measurement")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--rounds", type=int, default=2, help="best of N per cell (the machine is shared)")
    args = parser.parse_args()

    sock = bind_listener()
    sock.listen(2048)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/chat/completions"
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(sock,), daemon=True)
    server.start()
    run: Callable[..., float] = asyncio.run
    if args.loop == "uvloop":
        try:
            import uvloop

            run = uvloop.run
        except ImportError:
            args.loop = "asyncio (uvloop not installed)"
    try:
        print(
            f"{args.requests} POSTs per cell (best of {args.rounds}), client loop: {args.loop}, "
            "server: aiohttp in a separate process"
        )
        print(
            f"{'concurrency':>11} {'aiohttp req/s':>14} {'httpx req/s':>12} {'ratio':>6} {'OsmosisLLMClient':>17}"
        )
        for concurrency in (50, 200):
            a = max(run(bench_aiohttp(url, args.requests, concurrency)) for _ in range(args.rounds))
            h = max(run(bench_httpx(url, args.requests, concurrency)) for _ in range(args.rounds))
            o = max(run(bench_osmosis_client(url, args.requests, concurrency)) for _ in range(args.rounds))
            print(f"{concurrency:>11} {a:>14.0f} {h:>12.0f} {a / h:>6.2f} {o:>17.0f}")
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
