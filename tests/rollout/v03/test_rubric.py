"""0.3's ``osmosis_ai.eval.rubric.evaluate_rubric`` (async, keyword-only, ``"provider/model"``),
judged by this package's judge against the OpenAI-compatible stand-in."""

from __future__ import annotations

import os

import pytest

from osmosis_ai.eval.rubric import MissingAPIKeyError, ProviderRequestError, RubricResult, evaluate_rubric
from tests.support.openai_server import OpenAIServer, Reply


@pytest.fixture(autouse=True)
def _judge_at_the_stand_in(monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer) -> None:
    for name in [n for n in os.environ if n.endswith(("_API_BASE", "_BASE_URL", "_API_KEY"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_BASE", openai_server.url)


async def test_a_verdict_is_a_rubric_result(openai_server: OpenAIServer) -> None:
    openai_server.queue('{"score": 0.75, "explanation": "mostly right"}')
    result = await evaluate_rubric(
        solution_str="4", rubric="Is it 2+2?", model="openai/gpt-4o-mini", ground_truth="4", api_key="sk-test"
    )
    assert result == RubricResult(score=0.75, explanation="mostly right")
    sent = openai_server.requests[-1].json
    assert sent["model"] == "gpt-4o-mini"
    assert "Is it 2+2?" in str(sent["messages"])


async def test_a_bare_model_name_of_a_known_family_finds_its_provider(openai_server: OpenAIServer) -> None:
    openai_server.queue('{"score": 1, "explanation": "ok"}')
    result = await evaluate_rubric(solution_str="x", rubric="r", model="gpt-4o-mini", api_key="sk-test")
    assert result.score == 1.0


async def test_the_judges_errors_come_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_BASE")  # OpenAI's own API needs a key
    with pytest.raises(MissingAPIKeyError):
        await evaluate_rubric(solution_str="x", rubric="r", model="openai/gpt-4o-mini")
    with pytest.raises(TypeError, match="provider/model"):
        await evaluate_rubric(solution_str="x", rubric="r", model="mystery-model", api_key="k")


async def test_a_failing_provider_is_a_provider_error(openai_server: OpenAIServer) -> None:
    openai_server.default = Reply(status=400, body={"error": {"message": "bad request", "type": "invalid"}})
    with pytest.raises(ProviderRequestError):
        await evaluate_rubric(solution_str="x", rubric="r", model="openai/gpt-4o-mini", api_key="sk-test")
