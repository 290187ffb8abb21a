"""An ASGI app under uvicorn in a daemon thread on a free 127.0.0.1 port: the one way tests run servers.

    server = ThreadedServer(app, name="my-stand-in", lifespan="off").start()
    httpx.get(f"{server.url}/health")
    server.stop()

Keyword arguments other than ``name``, ``sock`` and ``make_server`` are ``uvicorn.Config`` options.
``sock`` lets a test learn the port before the app exists (``bind_listener()``); ``make_server``
builds the ``uvicorn.Server`` from the config (for a subclass such as ``DrainingServer``).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import uvicorn
from typing_extensions import Self

from tests.support.sockets import listener
from tests.support.waiting import wait_until

STARTUP_TIMEOUT_SECONDS = 10.0


class ThreadedServer:
    """See the module docstring."""

    def __init__(
        self,
        app: Any,
        *,
        name: str = "test-server",
        sock: socket.socket | None = None,
        make_server: Callable[[uvicorn.Config], uvicorn.Server] = uvicorn.Server,
        **config: Any,
    ) -> None:
        self._sock = sock or listener()
        self.port: int = self._sock.getsockname()[1]
        options = {"log_level": "warning", "access_log": False, **config}
        self.server = make_server(uvicorn.Config(app, **options))
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, name=name, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server's thread is still serving (or still shutting down)."""
        return self._thread.is_alive()

    def start(self) -> ThreadedServer:
        self._thread.start()

        def started() -> bool:
            if not self._thread.is_alive():
                raise RuntimeError(f"{self._thread.name} did not start")
            return bool(self.server.started)

        wait_until(started, STARTUP_TIMEOUT_SECONDS, what=f"{self._thread.name} started")
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class StandInServer:
    """Base of the scriptable stand-ins (trainer, OpenAI-compatible server): an ASGI ``_app`` method
    served by a :class:`ThreadedServer`, usable as a context manager."""

    thread_name = "stand-in"
    port: int = 0
    _runner: ThreadedServer | None = None

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1, start serving in a daemon thread, return ``self``."""
        self._runner = ThreadedServer(
            self._app,
            name=self.thread_name,
            interface="asgi3",
            lifespan="off",
            timeout_graceful_shutdown=1,
            backlog=2048,
        ).start()
        self.port = self._runner.port
        return self

    def stop(self) -> None:
        """Stop the server and wait for its thread."""
        if self._runner is not None:
            self._runner.stop(timeout=10)
        self._runner = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


async def read_body(receive: Any) -> bytes | None:
    """The whole request body, or ``None`` when the client disconnected before sending it."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def client_left_during(receive: Any, delay: float) -> bool:
    """Wait ``delay`` seconds before answering; True if the client disconnected meanwhile."""
    try:
        await asyncio.wait_for(receive(), timeout=delay)
    except asyncio.TimeoutError:
        return False
    return True


async def client_left_while_held(receive: Any, delay: float, gate: threading.Event | None) -> bool:
    """Hold an answer until ``gate`` is set (at most a minute), then ``delay`` seconds; True if the
    client disconnected meanwhile."""
    if gate is not None:
        await asyncio.to_thread(gate.wait, 60)
    return delay > 0 and await client_left_during(receive, delay)


class InFlight:
    """How many requests a stand-in holds at once (arrived, not yet answered): ``now`` and ``peak``.

    Use it as a context manager around the handling of one request.
    """

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __enter__(self) -> InFlight:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self.now -= 1

    def reset(self) -> None:
        with self._lock:
            self.peak = self.now


async def send_json_bytes(send: Any, status: int, data: bytes, headers: dict[str, str]) -> None:
    """Answer with ``data`` as ``application/json`` plus ``headers``."""
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": data})
