"""0.3 server fixtures: ``serve03(backend, **create_rollout_server_kwargs)`` runs the app under
uvicorn on loopback (stopped after the test), ``Gate`` holds a workflow or grader until released.
(``http``, a plain client, is the rollout tests' own fixture.) For interop: ``upstream_python``
(upstream 0.3.8's interpreter, or the test skipped without a Python 3.12), ``serve_main`` (the 0.3
``project/main.py`` as a subprocess, :class:`~tests.rollout.v03.served.Served`) and ``arithmetic``
(the policy stand-in answering ``what is A + B?`` with the sum)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.server import create_rollout_server
from tests.rollout.v03.served import Served
from tests.support import upstream03
from tests.support.openai_server import OpenAIServer
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


@pytest.fixture(scope="module")
def upstream_python() -> Path:
    try:
        python = upstream03.ensure()
    except upstream03.InstallError as exc:
        pytest.fail(f"upstream osmosis-ai 0.3.8 could not be installed: {exc}")
    if python is None:
        pytest.skip("no Python 3.12 on this machine (pyenv or python3.12 on PATH): upstream 0.3.8 needs it")
    return python


@pytest.fixture
def serve_main(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(python: Path | str = sys.executable, env: dict[str, str] | None = None, **extra: str) -> Served:
        if env is None:  # this package first on the path, whatever the virtualenv has installed
            paths = [str(upstream03.REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        env = {**env, **extra}
        served = Served(python, env, tmp_path / f"server-{len(started)}.log")
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def arithmetic(openai_server: OpenAIServer) -> OpenAIServer:
    """The policy stand-in answers ``what is A + B?`` with the sum."""

    def answer(payload: Any) -> str:
        found = re.search(r"what is (\d+) \+ (\d+)\?", str(payload["messages"][-1]["content"]))
        return str(int(found.group(1)) + int(found.group(2))) if found else "?"

    openai_server.handler = answer
    return openai_server
