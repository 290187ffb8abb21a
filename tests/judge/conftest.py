"""Fixtures for judge tests: provider key variables cleared, a judge pointed at the test server."""

from __future__ import annotations

import os
from typing import Any

import pytest

from osmosis_ai.judge.keys import DEFAULT_API_KEY_ENV
from osmosis_ai.judge.retry import RetryPolicy
from osmosis_ai.models.keys import PROVIDER_KEYS
from tests.support.openai_server import OpenAIServer


async def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture(autouse=True)
def _clean_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real credentials or API bases leak into tests from the developer's environment."""
    bases = {name for name in os.environ if name.endswith(("_API_BASE", "_BASE_URL"))}
    accepted = {name for keys in PROVIDER_KEYS.values() for name in keys.accepted}
    for name in {*DEFAULT_API_KEY_ENV.values(), *accepted, *bases}:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model_info(openai_server: OpenAIServer) -> dict[str, Any]:
    """An OpenAI judge served by the local test server."""
    return {"provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-test", "api_base": openai_server.url}


@pytest.fixture
def sleeps() -> list[float]:
    """Back-off delays requested through :func:`fast_retry`."""
    return []


@pytest.fixture
def fast_retry(sleeps: list[float]) -> RetryPolicy:
    """A retry policy that records its back-off delays instead of waiting."""

    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    return RetryPolicy(max_attempts=3, base_delay=0.01, sleep=record)
