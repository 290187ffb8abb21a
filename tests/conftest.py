"""Shared fixtures: the loopback stand-ins of ``tests/support/`` — a scriptable OpenAI-compatible server
(``openai_server``) and a scriptable TrainGate (``trainer``), each started once per session and reset
for every test; and a real ``redis-server`` (``redis_server``), likewise."""

from __future__ import annotations

import gc
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.redis_server import RedisServer, require_redis_server
from tests.support.trainer import TrainerStandIn

# A suite started in the background of a non-interactive shell inherits SIGINT ignored, and so would
# every process a test starts (an ignored signal stays ignored across exec); the Ctrl-C tests need it
# delivered. A handler, unlike SIG_IGN, is reset to the default in a started program.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def _openai_server_session() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def openai_server(_openai_server_session: OpenAIServer) -> Iterator[OpenAIServer]:
    """The session's OpenAI-compatible server, with an empty queue and no recorded requests."""
    _openai_server_session.reset()
    yield _openai_server_session
    _openai_server_session.reset()


@pytest.fixture(scope="session")
def _trainer_session() -> Iterator[TrainerStandIn]:
    with TrainerStandIn() as trainer:
        yield trainer


@pytest.fixture
def trainer(_trainer_session: TrainerStandIn) -> Iterator[TrainerStandIn]:
    """The session's TrainGate stand-in on 127.0.0.1, with empty queues and records for this test."""
    _trainer_session.reset()
    yield _trainer_session
    _trainer_session.reset()


@pytest.fixture(scope="session")
def _own_roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests' own cache and state directories are made: one directory of the session's
    temporary one, which then holds one entry more instead of two for every test (each numbered
    directory pytest makes there, a ``tmp_path`` too, lists all of its entries first)."""
    return tmp_path_factory.mktemp("own")


@pytest.fixture(autouse=True)
def _own_journal_root(_own_roots: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's commands keep their journals (``osmosis eval``, ``osmosis rollout run``) in a
    directory of its own: a run is never resumed from another test's, nor from the developer's cache;
    and a server's default outbox (``$XDG_STATE_HOME``) is the test's too, never the developer's."""
    monkeypatch.setenv("OSMOSIS_CACHE_DIR", tempfile.mkdtemp(prefix="cache", dir=_own_roots))
    monkeypatch.setenv("XDG_STATE_HOME", tempfile.mkdtemp(prefix="state", dir=_own_roots))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Collect garbage before the summary line: LiteLLM leaves its background logging task on event
    loops that tests have closed, and asyncio reports such tasks ("Task was destroyed but it is
    pending!") when they are collected — better before the summary than after it."""
    gc.collect()


@pytest.fixture(scope="session")
def _redis_session() -> Iterator[RedisServer]:
    server = RedisServer(require_redis_server())
    server.start()
    yield server
    server.close()


@pytest.fixture
def redis_server(_redis_session: RedisServer) -> Iterator[RedisServer]:
    """The session's real ``redis-server`` on loopback, running and empty for this test (skips
    when Debian's ``redis-server`` is not installed)."""
    if _redis_session.proc is None:
        _redis_session.start()
    import redis

    redis.Redis.from_url(_redis_session.url).flushall()
    yield _redis_session
    if _redis_session.proc is None:
        _redis_session.start()
