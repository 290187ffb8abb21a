"""An ASGI app under uvicorn in a daemon thread on a free 127.0.0.1 port: the one way tests run servers.

    server = ThreadedServer(app, name="my-stand-in", lifespan="off").start()
    httpx.get(f"{server.url}/health")
    server.stop()

Keyword arguments other than ``name``, ``sock`` and ``make_server`` are ``uvicorn.Config`` options.
``sock`` lets a test learn the port before the app exists (``bind_listener()``); ``make_server``
builds the ``uvicorn.Server`` from the config (for a subclass such as ``DrainingServer``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn

from osmosis_ai._sockets import bind_listener

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
        self._sock = sock or bind_listener()
        self.port: int = self._sock.getsockname()[1]
        options = {"log_level": "warning", "access_log": False, **config}
        self.server = make_server(uvicorn.Config(app, **options))
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, name=name, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadedServer:
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self._thread.name} did not start")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
