"""The model seam tells an adaptive limit how every request ended, on both routes."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_ai.models.complete import complete, route
from osmosis_ai.models.concurrency import CallOutcome
from osmosis_ai.models.errors import ModelCallError
from tests.support.openai_server import OpenAIServer, Reply


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[CallOutcome, float | None]] = []

    def observe(self, outcome: CallOutcome, latency: float, *, retry_after: float | None = None) -> None:
        assert latency >= 0
        self.seen.append((outcome, retry_after))


@pytest.mark.parametrize("force_litellm", [False, True], ids=["direct", "litellm"])
async def test_every_request_is_observed(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, force_litellm: bool
) -> None:
    if force_litellm:
        monkeypatch.setenv("OSMOSIS_FORCE_LITELLM", "1")
    target: Any = route("m", api_base=openai_server.url)
    recorder = Recorder()
    openai_server.queue("fine", Reply(status=429, headers={"Retry-After": "2"}), Reply(status=400))
    await complete(target, [{"role": "user", "content": "hi"}], timeout=10, observer=recorder)
    for _ in range(2):
        with pytest.raises(ModelCallError):
            await complete(target, [{"role": "user", "content": "hi"}], timeout=10, observer=recorder)
    assert recorder.seen == [
        (CallOutcome.SUCCESS, None),
        (CallOutcome.REFUSED, 2.0),
        (CallOutcome.ERROR, None),
    ]
