"""A minimal OpenAI-compatible judge for the benchmarks, run as its own process.

    python -m benchmarks.openai_stub [--delay SECONDS] [--port 0]

It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) with a ``chat.completion``
whose content is a judge verdict ``{"score": s, "explanation": "benchmark"}``. The score is derived
from a hash of the last message's text, so every candidate gets its own stable score and a mix-up
between requests and results would show. ``--delay`` seconds are waited before each answer, to
stand for a provider's latency. The first line on stdout is the port it listens on.

:class:`StubProcess` starts it for the length of a ``with`` block, in a separate process so its
CPU time is not counted against the client being measured (:class:`ServerProcess` does the same
for the other stand-ins).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import socket
import subprocess
import sys
import time
from typing import Any

from aiohttp import web


def verdict_for(text: str) -> dict[str, Any]:
    """The stub's verdict on ``text``: a score in ``[0, 1]`` taken from its hash."""
    score = int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) / 0xFFFF
    return {"score": round(score, 4), "explanation": "benchmark"}


def _completion(content: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def build_app(delay: float) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        payload = await request.json()
        if delay:
            await asyncio.sleep(delay)
        content = json.dumps(verdict_for(str(payload["messages"][-1]["content"])))
        return web.json_response(_completion(content, str(payload.get("model", "stub"))))

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    return app


async def _serve(delay: float, port: int) -> None:
    runner = web.AppRunner(build_app(delay), access_log=None)
    await runner.setup()
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    await web.SockSite(runner, listener).start()
    print(listener.getsockname()[1], flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


class ServerProcess:
    """``python -m module *arguments`` in a child process, for a ``with`` block that gets its ``/v1`` URL.

    The module is a server of this package that prints the port it listens on as its first line.
    """

    def __init__(self, module: str, *arguments: str, name: str) -> None:
        self.command = [sys.executable, "-m", module, *arguments]
        self.name = name
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        self._process = subprocess.Popen(self.command, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        port = self._process.stdout.readline().strip()
        if not port.isdigit():
            self.__exit__()
            raise RuntimeError(f"{self.name} did not start")
        return f"http://127.0.0.1:{port}/v1"

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None


class StubProcess(ServerProcess):
    """The stub in a child process; ``with StubProcess(delay) as api_base:`` gives its ``/v1`` URL."""

    def __init__(self, delay: float) -> None:
        super().__init__("benchmarks.openai_stub", "--delay", str(delay), name="the OpenAI stub")
        self.delay = delay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before each answer")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.delay, args.port))


if __name__ == "__main__":
    main()
