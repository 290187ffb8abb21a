"""LiteLLM model ids, default timeouts and sampling parameters per model."""

from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Any

import pytest

from osmosis_ai import evaluate_rubric
from osmosis_ai.judge.routing import default_timeout, litellm_model_id, sends_temperature
from tests.support.openai_server import OpenAIServer


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-4o", "openai/gpt-4o"),
        ("openai", "GPT-5-mini", "openai/responses/GPT-5-mini"),
        ("openai", "openai/gpt-4o", "openai/gpt-4o"),  # no double prefix
        ("openrouter", "openai/gpt-5-mini", "openrouter/openai/gpt-5-mini"),
        ("anthropic", "claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
    ],
)
def test_litellm_model_ids(provider: str, model: str, expected: str) -> None:
    assert litellm_model_id(provider, model) == expected


@pytest.mark.parametrize(
    ("provider", "model", "seconds"),
    [("xai", "grok-4-fast", 60), ("xai", "grok-3", 45), ("openai", "gpt-5", 45), ("openai", "gpt-4o", 30),
     ("gemini", "g", 45), ("cerebras", "c", 60), ("openrouter", "o", 60), ("anthropic", "a", 30)],
)  # fmt: skip
def test_default_timeouts(provider: str, model: str, seconds: float) -> None:
    assert default_timeout(provider, model) == seconds


def test_gpt5_gets_no_temperature() -> None:
    assert not sends_temperature("gpt-5-mini") and not sends_temperature("openai/gpt-5")
    assert (
        not sends_temperature("o3-mini") and not sends_temperature("o1") and not sends_temperature("o4-mini")
    )
    assert sends_temperature("gpt-4o") and sends_temperature("olmo-7b")


def test_reasoning_models_drop_unsupported_parameters(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    evaluate_rubric("r", "x", {**model_info, "model": "o3-mini", "reasoning_effort": "low"})
    sent = openai_server.requests[-1].json
    assert sent["reasoning_effort"] == "low" and "temperature" not in sent


async def test_sync_api_works_inside_a_running_event_loop(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    openai_server.queue('{"score": 0.3, "explanation": "x"}')
    assert evaluate_rubric("r", "x", model_info) == 0.3


def test_a_synchronous_call_leaves_no_thread_running(
    openai_server: OpenAIServer, model_info: dict[str, Any]
) -> None:
    before = set(threading.enumerate())
    assert evaluate_rubric("r", "x", model_info) == 1.0
    assert evaluate_rubric("r", "x", model_info) == 1.0  # LiteLLM's clients of the first loop are not reused
    assert set(threading.enumerate()) <= before


def _judge_in_child(model_info: dict[str, Any], results: Any) -> None:
    results.put(evaluate_rubric("r", "x", model_info))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sync_api_works_in_a_forked_child(openai_server: OpenAIServer, model_info: dict[str, Any]) -> None:
    evaluate_rubric("r", "x", model_info)  # the parent has called the judge before the fork
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_judge_in_child, args=(model_info, results))
    child.start()
    try:
        assert results.get(timeout=10) == 1.0
    finally:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()
            child.join()
    assert child.exitcode == 0
