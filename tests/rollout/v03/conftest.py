"""0.3 server fixtures: ``serve03(backend, **create_rollout_server_kwargs)`` runs the app under
uvicorn on loopback (stopped after the test), ``Gate`` holds a workflow or grader until released.
(``http``, a plain client, is the rollout tests' own fixture.)"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.server import create_rollout_server
from tests.support.server import RunningServer


class Gate:
    """``await gate.hold()`` in user code waits (cancellably) until the test calls ``release()``;
    ``entered`` and ``cancelled`` say what happened to the holders."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.entered = threading.Event()
        self.cancelled = threading.Event()

    async def hold(self) -> None:
        self.entered.set()
        try:
            while not self.released.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def serve03() -> Iterator[Callable[..., RunningServer]]:
    running: list[RunningServer] = []

    def start(backend: LocalBackend, **kwargs: Any) -> RunningServer:
        kwargs.setdefault("configure_logging", False)
        server = RunningServer(create_rollout_server(backend=backend, **kwargs)).start()
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()
