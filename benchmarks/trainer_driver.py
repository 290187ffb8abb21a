"""A trainer stand-in that drives any rollout server over the wire protocol, for load measurements.

    python benchmarks/trainer_driver.py --target http://127.0.0.1:9000 [--rollouts 500]
        [--concurrency 50] [--tool-turns 1] [--llm-delay 0] [--timeout 120] [--api-key KEY]

It plays TrainGate: it listens on ``--port`` (loopback), sends ``POST /v1/rollout/init`` to
``--target`` for each rollout with at most ``--concurrency`` unfinished at a time, answers every
``/v1/chat/completions`` call at once with a canned reply (``--tool-turns`` replies that call the
``add`` tool with ``a=1, b=2``, then a final ``#### 3``, each with token ids and logprobs), and
counts a rollout finished when its ``/v1/rollout/completed`` arrives. ``--llm-delay`` makes every
chat reply wait, to hold many rollouts in flight.

The last line printed is one JSON object: ``completed``, ``rollouts_per_s``, ``p50_ms``/``p99_ms``
(init sent to callback received), ``statuses``, ``init_errors``, ``extra_callbacks`` (callbacks for
unknown or already finished rollouts), ``timed_out`` and ``cpu_ms_per_rollout`` (the driver's own
CPU time per finished rollout: what it takes from a server it shares the cores with). Exit status
0 when every rollout finished.

Both sides speak HTTP/1.1 over bare asyncio protocols with ``httptools``' parsers (keep-alive,
``Content-Length`` bodies, one request at a time per connection), on uvloop when it is installed:
the driver shares the cores with the server it measures, and aiohttp's client and server cost it
three times the CPU per rollout (0.97 ms against 0.30 with one tool turn). Only ``httptools`` is
needed, nothing from the package under test, so any server can be measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Coroutine
from typing import Any
from urllib.parse import urlsplit

FINAL_ANSWER = {"role": "assistant", "content": "1 + 2 = 3. The answer is #### 3"}


def _tool_call(turn: int) -> dict[str, Any]:
    call = {
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}


class Trainer:
    """The trainer's side: the two endpoints a rollout server calls, and the per-rollout bookkeeping.

    Each takes the request body and returns the reply's (status, body); :class:`TrainerProtocol`
    serves them.
    """

    def __init__(self, tool_turns: int, llm_delay: float) -> None:
        self.tool_turns = tool_turns
        self.llm_delay = llm_delay
        self.turns: dict[str, int] = {}
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.extra_callbacks = 0
        self.routes = {b"/v1/chat/completions": self.chat, b"/v1/rollout/completed": self.completed}

    def chat(self, raw: bytes) -> tuple[int, bytes]:
        body = json.loads(raw)
        rollout_id = str(body.get("rollout_id", ""))
        turn = self.turns.get(rollout_id, 0)
        self.turns[rollout_id] = turn + 1
        message = _tool_call(turn) if turn < self.tool_turns else FINAL_ANSWER
        prompt_tokens = 12 * len(body.get("messages", ()))
        reply = {
            "id": f"chatcmpl-{rollout_id}-{turn}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "driver",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 6,
                "total_tokens": prompt_tokens + 6,
            },
            "token_ids": [101, 102, 103, 104, 105, 106],
            "logprobs": [-0.25] * 6,
            "prompt_token_ids": list(range(prompt_tokens)),
        }
        return 200, json.dumps(reply).encode()

    def completed(self, raw: bytes) -> tuple[int, bytes]:
        body = json.loads(raw)
        waiter = self.waiting.get(str(body.get("rollout_id", "")))
        if waiter is None or waiter.done():
            self.extra_callbacks += 1
        else:
            waiter.set_result(body)
        return 200, b'{"status":"ok"}'


_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}


class ClientConnection(asyncio.Protocol):
    """One keep-alive connection to the server under test: a request at a time, its (status, body)."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.parse_error = httptools.HttpParserError
        self.transport: asyncio.Transport | None = None
        self.reply: asyncio.Future[tuple[int, bytes]] | None = None
        self.body: list[bytes] = []
        self.reusable = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a TCP connection's: a Transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.reusable = False
        self._fail(ConnectionError(f"the server closed the connection: {exc or 'EOF'}"))

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except self.parse_error as exc:
            self._fail(exc)
            self.close()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        reply, self.reply = self.reply, None
        body, self.body = b"".join(self.body), []
        self.reusable = self.parser.should_keep_alive()
        if reply is not None and not reply.done():
            reply.set_result((self.parser.get_status_code(), body))

    def _fail(self, exc: Exception) -> None:
        reply, self.reply = self.reply, None
        if reply is not None and not reply.done():
            reply.set_exception(exc)

    async def send(self, request: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.reusable = False
        self.reply = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.reply

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Client:
    """POSTs to one server over a pool of keep-alive :class:`ClientConnection`s (one per request in
    flight, reused in turn)."""

    def __init__(self, target: str, headers: dict[str, str]) -> None:
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            raise SystemExit(f"--target: expected http://HOST:PORT, got {target!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.base = parts.path.rstrip("/")
        fields = {"Host": parts.netloc, "Content-Type": "application/json", **headers}
        self.head = "".join(f"{name}: {value}\r\n" for name, value in fields.items()).encode()
        self.idle: list[ClientConnection] = []

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        request = b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s" % (
            (self.base + path).encode(), self.head, len(body), body,
        )  # fmt: skip
        while self.idle:
            connection = self.idle.pop()
            if connection.transport is None:
                continue
            try:
                return await self._send(connection, request)
            except ConnectionError:  # closed by the server as it sat idle; an init is deduplicated: resend
                continue
        return await self._send(await self._connect(), request)

    async def _send(self, connection: ClientConnection, request: bytes) -> tuple[int, bytes]:
        try:
            reply = await connection.send(request)
        except BaseException:
            connection.close()  # cancelled or failed mid-request: its state is unknown
            raise
        if connection.reusable and connection.transport is not None:
            self.idle.append(connection)
        else:
            connection.close()
        return reply

    async def _connect(self) -> ClientConnection:
        _, connection = await asyncio.get_running_loop().create_connection(
            ClientConnection, self.host, self.port
        )
        return connection

    def close(self) -> None:
        for connection in self.idle:
            connection.close()
        self.idle.clear()


class TrainerProtocol(asyncio.Protocol):
    """One connection from the server under test to :class:`Trainer`'s two endpoints. Chat replies
    wait ``llm_delay`` on a timer."""

    def __init__(self, trainer: Trainer) -> None:
        import httptools

        self.trainer = trainer
        self.parser = httptools.HttpRequestParser(self)
        self.parse_error = httptools.HttpParserError
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a TCP server's: a Transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except self.parse_error:
            self._reply(400, b'{"detail":"bad request"}', keep_alive=False)

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        path = self.url.split(b"?", 1)[0]
        raw = b"".join(self.body)
        self.url, self.body = b"", []
        keep_alive = self.parser.should_keep_alive()
        route = self.trainer.routes.get(path)
        if route is None:
            self._reply(404, b'{"detail":"Not Found"}', keep_alive)
            return
        status, reply = route(raw)
        if self.trainer.llm_delay and route == self.trainer.chat:
            asyncio.get_running_loop().call_later(
                self.trainer.llm_delay, self._reply, status, reply, keep_alive
            )
        else:
            self._reply(status, reply, keep_alive)

    def _reply(self, status: int, body: bytes, keep_alive: bool) -> None:
        transport = self.transport
        if transport is None:
            return
        head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n" % (
            status, _REASONS[status], len(body), b"" if keep_alive else b"Connection: close\r\n",
        )  # fmt: skip
        transport.write(head + body)
        if not keep_alive:
            transport.close()


def _init_body(rollout_id: str, trainer_url: str, tool_turns: int) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "server_url": trainer_url,
        "messages": [
            {"role": "system", "content": "You are a calculator. Use the tools."},
            {"role": "user", "content": "What is 1 + 2?"},
        ],
        "completion_params": {"temperature": 1.0, "max_tokens": 64},
        "max_turns": tool_turns + 2,
        "max_tokens_total": 8192,
        "metadata": {"ground_truth": "3"},
        "api_key": "driver-callback-key",
    }


def _percentile_ms(sorted_seconds: list[float], fraction: float) -> float:
    if not sorted_seconds:
        return -1.0
    index = min(len(sorted_seconds) - 1, int(fraction * len(sorted_seconds)))
    return round(sorted_seconds[index] * 1000, 2)


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    trainer = Trainer(args.tool_turns, args.llm_delay)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: TrainerProtocol(trainer), "127.0.0.1", args.port, backlog=2048
    )
    trainer_url = f"http://127.0.0.1:{args.port}"
    client = Client(args.target, {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {})

    slots = asyncio.Semaphore(args.concurrency)
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    init_errors: list[str] = []

    async def one(index: int) -> None:
        rollout_id = f"{args.tag}drv{index}-{os.getpid()}"
        async with slots:
            waiter: asyncio.Future[dict[str, Any]] = loop.create_future()
            trainer.waiting[rollout_id] = waiter
            started = time.perf_counter()
            try:
                body = json.dumps(_init_body(rollout_id, trainer_url, args.tool_turns)).encode()
                status, text = await client.post("/v1/rollout/init", body)
                if status not in (200, 202):
                    init_errors.append(f"HTTP {status}: {text[:200].decode(errors='replace')}")
                    return
                report = await waiter
            except Exception as exc:  # a benchmark counts failures instead of stopping at the first
                init_errors.append(repr(exc)[:200])
                return
            latencies.append(time.perf_counter() - started)
            status = str(report.get("status"))
            statuses[status] = statuses.get(status, 0) + 1

    started, cpu_started = time.perf_counter(), _cpu_seconds()
    tasks = [asyncio.create_task(one(index)) for index in range(args.rollouts)]
    _, pending = await asyncio.wait(tasks, timeout=args.timeout)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    client.close()
    wall, cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
    listener.close()

    latencies.sort()
    return {
        "tag": args.tag,
        "rollouts": args.rollouts,
        "concurrency": args.concurrency,
        "tool_turns": args.tool_turns,
        "completed": len(latencies),
        "statuses": statuses,
        "wall_s": round(wall, 3),
        "rollouts_per_s": round(len(latencies) / wall, 1) if wall else 0.0,
        "p50_ms": _percentile_ms(latencies, 0.5),
        "p99_ms": _percentile_ms(latencies, 0.99),
        "mean_ms": round(statistics.mean(latencies) * 1000, 2) if latencies else -1.0,
        "init_errors": len(init_errors),
        "first_errors": init_errors[:3],
        "extra_callbacks": trainer.extra_callbacks,
        "timed_out": len(pending),
        "cpu_ms_per_rollout": round(cpu / len(latencies) * 1000, 3) if latencies else -1.0,
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run(main: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """``main`` on uvloop's event loop when it is installed (see the module docstring)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="http://127.0.0.1:9000", help="the rollout server's base URL")
    parser.add_argument("--port", type=int, default=9100, help="port this trainer listens on (loopback)")
    parser.add_argument("--rollouts", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--tool-turns", type=int, default=1)
    parser.add_argument("--llm-delay", type=float, default=0.0, help="seconds every chat reply waits")
    parser.add_argument("--timeout", type=float, default=120.0, help="bound on the whole run, seconds")
    parser.add_argument("--api-key", default=None, help="Bearer key the rollout server expects")
    parser.add_argument("--tag", default="", help="prefix for rollout ids")
    args = parser.parse_args()
    result = _run(drive(args))
    print(json.dumps(result))
    return 0 if result["completed"] == args.rollouts else 1


if __name__ == "__main__":
    sys.exit(main())
