"""Rollout fixtures: ``serve`` starts ``create_app(...)`` under uvicorn on 127.0.0.1 and stops it after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout.server.app import create_app
from tests.support.server import RunningServer, fast_settings
from tests.support.waiting import tls


@pytest.fixture
def serve() -> Iterator[Callable[..., RunningServer]]:
    """``serve(agent, **create_app_kwargs) -> RunningServer`` (fast client settings unless given);
    ``serve(agent, config=fast_config(...))`` for a ``ServerConfig``."""
    running: list[RunningServer] = []

    def start(agent: Any, **kwargs: Any) -> RunningServer:
        if "config" not in kwargs:
            kwargs.setdefault("settings", fast_settings())
        server = RunningServer(create_app(agent, **kwargs)).start()
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    """A plain synchronous HTTP client for driving the server under test."""
    with httpx.Client(timeout=10.0, verify=tls()) as client:
        yield client
