"""evaluate_rubric_batch: input order, bounded concurrency, errors, shared rate limit."""

from __future__ import annotations

import json
import threading
import types
from typing import Any

import pytest

from osmosis_ai import ProviderRequestError, evaluate_rubric_batch
from osmosis_ai.judge import ratelimit
from osmosis_ai.judge.batch import aevaluate_rubric_batch
from osmosis_ai.judge.ratelimit import RateLimiter
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import wait_until


def _echo_score(server: OpenAIServer) -> None:
    """Reply with the number quoted in the candidate output, slower for every third item."""

    def handler(payload: Any) -> Reply:
        user = payload["messages"][1]["content"]
        number = int(user.split("<<<BEGIN_CANDIDATE_OUTPUT>>>\n")[1].split("\n")[0])
        delay = 0.05 if number % 3 == 0 else 0.0
        return Reply(content=json.dumps({"score": number / 100, "explanation": str(number)}), delay=delay)

    server.handler = handler


def test_batch_returns_results_in_input_order(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    _echo_score(openai_server)
    items = [{"rubric": "r", "solution_str": str(n), "model_info": model_info} for n in range(20)]
    progress: list[tuple[int, int]] = []
    results = evaluate_rubric_batch(items, concurrency=4, on_progress=lambda *step: progress.append(step))
    assert results == [n / 100 for n in range(20)]
    assert len(openai_server.requests) == 20
    assert progress == [(done, 20) for done in range(1, 21)]


async def test_the_blocking_batch_works_inside_a_running_event_loop(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    _echo_score(openai_server)
    items = [{"rubric": "r", "solution_str": str(n), "model_info": model_info} for n in range(3)]
    assert evaluate_rubric_batch(items, concurrency=2) == [0.0, 0.01, 0.02]


async def test_async_batch_with_details_and_errors(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    openai_server.queue('{"score": 0.1, "explanation": "a"}', Reply(status=400), Reply(status=400))
    items = [
        {"rubric": "r", "solution_str": "a", "model_info": model_info, "return_details": True},
        {"rubric": "r", "solution_str": "b", "model_info": model_info},
    ]
    results = await aevaluate_rubric_batch(items, concurrency=1, return_exceptions=True)
    assert isinstance(results[0], dict) and results[0]["explanation"] == "a"
    assert isinstance(results[1], ProviderRequestError)
    with pytest.raises(ProviderRequestError):
        await aevaluate_rubric_batch(items[1:])


def test_batch_rejects_bad_arguments(model_info: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="items\\[1\\]"):
        evaluate_rubric_batch([{"rubric": "r", "solution_str": "x", "model_info": model_info}, "oops"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="concurrency"):
        evaluate_rubric_batch([], concurrency=0)
    assert evaluate_rubric_batch([]) == []


def test_concurrency_bounds_requests_in_flight(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    gate = threading.Event()  # the "provider" answers nothing until four requests are in flight
    openai_server.default = Reply(gate=gate)
    items = [{"rubric": "r", "solution_str": str(n), "model_info": model_info} for n in range(8)]

    def open_when_four_wait() -> None:
        try:
            wait_until(lambda: openai_server.in_flight.now == 4, timeout=30, what="four requests in flight")
        finally:
            gate.set()

    opener = threading.Thread(target=open_when_four_wait, daemon=True)
    opener.start()
    results = evaluate_rubric_batch(items, concurrency=4)
    opener.join(5)
    assert len(results) == len(openai_server.requests) == 8
    assert openai_server.in_flight.peak == 4  # four at once, never more


class RecordingLimiter(RateLimiter):
    """A limiter that also records the wait it hands out for each request."""

    def __init__(self, requests_per_minute: float) -> None:
        super().__init__(requests_per_minute)
        self.waits: list[float] = []

    def reserve(self) -> float:
        wait = super().reserve()
        self.waits.append(wait)
        return wait


def test_rate_limit_spaces_requests(
    openai_server: OpenAIServer, model_info: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clock that stands still: each slot is then exactly one interval after the previous one.
    monkeypatch.setattr(ratelimit, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
    limiter = RecordingLimiter(1200)  # one request per 50 ms
    items = [{"rubric": "r", "solution_str": str(n), "model_info": model_info} for n in range(4)]
    evaluate_rubric_batch(items, concurrency=4, rate_limiter=limiter)
    assert len(openai_server.requests) == 4
    assert sorted(limiter.waits) == pytest.approx([0.0, 0.05, 0.1, 0.15])


def test_rate_limiter_reserves_evenly_spaced_slots() -> None:
    limiter = RateLimiter(600)
    waits = [limiter.reserve() for _ in range(3)]
    assert (
        waits[0] == 0
        and waits[1] == pytest.approx(0.1, abs=0.01)
        and waits[2] == pytest.approx(0.2, abs=0.01)
    )
    with pytest.raises(ValueError):
        RateLimiter(0)


def test_auto_concurrency_judges_everything_in_order_and_bad_values_are_refused(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    _echo_score(openai_server)
    items = [{"rubric": "r", "solution_str": str(n), "model_info": model_info} for n in range(40)]
    assert evaluate_rubric_batch(items, concurrency="auto") == [n / 100 for n in range(40)]
    # (the limit also looks for the server's /metrics beside /v1)
    assert sum(r.path.endswith("/chat/completions") for r in openai_server.requests) == 40
    for bad in ("sometimes", 0, True):
        with pytest.raises(Exception, match="concurrency must be"):
            evaluate_rubric_batch(items[:1], concurrency=bad)  # type: ignore[arg-type]
