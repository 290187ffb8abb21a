"""Shared fixtures: a scriptable OpenAI-compatible server on loopback (``tests/support/openai_server.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tests.support.openai_server import OpenAIServer


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Collect garbage before the summary line: LiteLLM leaves its background logging task on event
    loops that tests have closed, and asyncio reports such tasks ("Task was destroyed but it is
    pending!") when they are collected — better before the summary than after it."""
    gc.collect()
