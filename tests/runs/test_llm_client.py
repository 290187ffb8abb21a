"""ExternalLLMClient through LiteLLM's real code path, against the local OpenAI-compatible stand-in."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from osmosis_ai._http import RetryPolicy
from osmosis_ai.models.errors import ProviderError, SystemicProviderError
from osmosis_ai.rollout import RolloutContext
from osmosis_ai.runs.executors.model_client import ExternalLLMClient
from osmosis_ai.runs.executors.requests import dataset_row_to_request
from tests.support.agents import OutcomeAgent
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.sockets import free_port

HI = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}


class Waits:
    """A RetryPolicy ``sleep`` that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def _client(url: str, waits: Waits | None = None, **kwargs: Any) -> ExternalLLMClient:
    retry = RetryPolicy(max_attempts=4, base_delay=0.01, jitter=False, sleep=waits or Waits())
    return ExternalLLMClient("local-model", api_key="sk-test", api_base=url, retry=retry, **kwargs)


async def test_a_call_returns_the_message_and_counts_it(openai_server: OpenAIServer) -> None:
    openai_server.queue("4")
    client = _client(openai_server.url)
    assert (client.display_name, client.model, client.api_base) == (
        "local-model",
        "openai/local-model",
        openai_server.url,
    )
    client.set_tools([TOOL])
    result = await client.chat_completions(HI, temperature=0.3)
    assert result.message == {"role": "assistant", "content": "4"} and result.finish_reason == "stop"
    assert result.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    sent = openai_server.requests[0]
    assert sent.json["model"] == "local-model" and sent.json["temperature"] == 0.3
    assert sent.json["tools"] == [TOOL] and sent.headers["authorization"] == "Bearer sk-test"
    metrics = client.get_metrics()
    assert (metrics.num_llm_calls, metrics.prompt_tokens, metrics.response_tokens) == (1, 10, 5)
    client.reset_metrics()
    assert client.get_metrics().num_llm_calls == 0
    await client.chat_completions(HI)
    assert "tools" not in openai_server.requests[1].json  # a new row starts without tools


async def test_server_errors_are_retried_honouring_retry_after(openai_server: OpenAIServer) -> None:
    openai_server.queue(
        Reply(status=503, headers={"retry-after": "2"}), Reply(status=500), Reply(status=429), "ok"
    )
    waits = Waits()
    client = _client(openai_server.url, waits)
    result = await client.chat_completions(HI)
    assert result.message["content"] == "ok" and client.retries == 3
    assert len(openai_server.requests) == 4
    assert waits.seconds[0] >= 2  # never sooner than the provider asked
    assert waits.seconds[1:] == [0.02, 0.04]  # the back-off doubles


async def test_a_server_that_takes_the_call_and_stays_silent_is_asked_once_more_not_every_attempt(
    openai_server: OpenAIServer,
) -> None:
    openai_server.default = Reply(delay=2.0)  # past the call's timeout, every time
    client = ExternalLLMClient(
        "openai/local-model",
        api_key="sk-test",
        api_base=openai_server.url,
        retry=RetryPolicy(sleep=Waits()),
        timeout=0.2,
    )
    with pytest.raises(ProviderError):
        await client.chat_completions(HI)
    assert len(openai_server.requests) == 2 and client.retries == 1  # the policy allows 4 attempts


async def test_row_errors_and_systemic_errors(openai_server: OpenAIServer) -> None:
    client = _client(openai_server.url)
    openai_server.queue(Reply(status=400))
    with pytest.raises(ProviderError) as row_error:
        await client.chat_completions(HI)
    assert not isinstance(row_error.value, SystemicProviderError)
    assert (row_error.value.kind, row_error.value.status) == ("bad_request", 400)
    assert len(openai_server.requests) == 1  # a refused request is not asked again

    openai_server.default = Reply(status=500)
    with pytest.raises(ProviderError, match="after 4 attempts") as exhausted:
        await client.chat_completions(HI)
    assert not isinstance(exhausted.value, SystemicProviderError)

    openai_server.reset()
    openai_server.default = Reply(status=401)
    with pytest.raises(SystemicProviderError, match="refused the API key") as systemic:
        await client.chat_completions(HI)
    assert systemic.value.kind == "auth" and len(openai_server.requests) == 1
    assert (systemic.value.duration_ms, systemic.value.tokens) == (None, None)


async def test_an_endpoint_that_never_answers_is_systemic_after_the_retries() -> None:
    waits = Waits()
    client = _client(f"http://127.0.0.1:{free_port()}/v1", waits)
    with pytest.raises(SystemicProviderError, match="does not answer") as caught:
        await client.chat_completions(HI)
    assert caught.value.kind == "connection" and len(waits.seconds) == 3


async def test_preflight_check(openai_server: OpenAIServer) -> None:
    client = _client(openai_server.url)
    openai_server.queue(Reply(status=429))
    await client.preflight_check()  # a rate limit proves the key and the model
    openai_server.queue(Reply(status=404))
    with pytest.raises(SystemicProviderError, match="does not know this model"):
        await client.preflight_check()
    async with client:
        pass
    await client.close()  # idempotent


async def test_one_client_serves_concurrent_rows_with_their_own_counters(openai_server: OpenAIServer) -> None:
    openai_server.default = Reply(content="ok", delay=0.05)
    client = _client(openai_server.url)

    async def row(calls: int) -> int:
        client.reset_metrics()
        for _ in range(calls):
            await client.chat_completions(HI)
        return client.get_metrics().num_llm_calls

    assert await asyncio.gather(row(1), row(2), row(3)) == [1, 2, 3]


async def test_an_agent_runs_in_process_on_a_dataset_row(openai_server: OpenAIServer) -> None:
    openai_server.queue("3")
    row = {"system_prompt": "s", "user_prompt": "What is 1 + 2?", "ground_truth": "3", "level": "easy"}
    request = dataset_row_to_request(row, 7, rollout_id_prefix="test", metadata_overrides={"test_mode": True})
    assert request.rollout_id == "test-7" and request.max_tokens_total == 4096
    assert request.metadata == {"level": "easy", "ground_truth": "3", "row_index": 7, "test_mode": True}
    client = _client(openai_server.url)
    result = await OutcomeAgent().run(RolloutContext(request=request, tools=[], llm=client))
    assert result.status == "COMPLETED" and result.final_messages[-1]["content"] == "3"
    assert openai_server.requests[0].json["messages"][0] == {"role": "system", "content": "s"}


def test_0_2_import_paths() -> None:
    from osmosis_ai.rollout.eval import (
        DatasetReader,
        ExternalLLMClient,
        LocalExecutionError,
        SystemicProviderError,
    )
    from osmosis_ai.rollout.eval.dataset import REQUIRED_COLUMNS
    from osmosis_ai.rollout.eval.llm_client import ExternalLLMClient as Same

    assert Same is ExternalLLMClient and issubclass(SystemicProviderError, LocalExecutionError)
    assert DatasetReader.__module__ == "osmosis_ai.runs.dataset"
    assert sorted(REQUIRED_COLUMNS) == ["ground_truth", "system_prompt", "user_prompt"]
    assert ExternalLLMClient().display_name == "gpt-5-mini"
    assert ExternalLLMClient("anthropic/claude").model == "anthropic/claude"
