"""The direct path to an OpenAI-compatible base URL and the path through LiteLLM, side by side against
the same stand-in: the same request on the wire, the same parsed reply, the same error classes and
the same outcome for every failure mode, for the seam and for each of its callers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from osmosis_ai._http import RetryPolicy
from osmosis_ai.judge.errors import ModelNotFoundError, ProviderRequestError
from osmosis_ai.judge.evaluate import aevaluate_rubric
from osmosis_ai.judge.retry import RetryPolicy as JudgeRetryPolicy
from osmosis_ai.models import complete as models
from osmosis_ai.models.errors import ModelCallError, ProviderError, SystemicProviderError
from osmosis_ai.runs.executors.model_client import ExternalLLMClient
from osmosis_ai.traingate.errors import PolicyError
from osmosis_ai.traingate.policy.litellm import TOKEN_ID_OPTIONS, LiteLLMPolicy
from tests.support.openai_server import OpenAIServer, Reply

HI = [{"role": "user", "content": "What is 6 * 7?"}]
TOOL = {
    "type": "function",
    "function": {"name": "multiply", "parameters": {"type": "object", "properties": {}}},
}
CONTEXT = {
    "error": {"message": "This model's maximum context length is 4096 tokens. However, you requested 9000."}
}
VERDICT = '{"score": 0.5, "explanation": "half"}'


@pytest.fixture(params=["direct", "litellm"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs once on the direct path and once through LiteLLM (``OSMOSIS_FORCE_LITELLM``)."""
    monkeypatch.setenv(models.FORCE_LITELLM_ENV, "1" if request.param == "litellm" else "0")
    yield request.param


def _vllm_reply() -> Reply:
    """A tool call with everything vLLM adds: token ids, logprobs, prompt ids, reasoning text."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
    }
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call],
        "reasoning_content": "use the tool",
    }
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": "tool_calls",
        "token_ids": [11, 12],
        "logprobs": {
            "content": [{"token": "token_id:11", "logprob": -0.25}, {"token": "token_id:12", "logprob": -0.5}]
        },
    }
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    body = {"id": "c", "object": "chat.completion", "created": 1, "model": "served", "choices": [choice],
            "usage": usage, "prompt_token_ids": [1, 2, 3]}  # fmt: skip
    return Reply(body=body)


async def test_the_same_request_and_the_same_parsed_reply_on_both_paths(openai_server: OpenAIServer) -> None:
    parsed = []
    for force in (False, True):
        openai_server.queue(_vllm_reply())
        target = models.route(
            "openai/served", api_base=openai_server.url, api_key="sk-k", force_litellm=force
        )
        reply = await models.complete(
            target, HI, timeout=10, tools=[TOOL], temperature=0.3, top_p=0.9, max_tokens=64, stop=["\n\n"],
            logprobs=True, extra_body=dict(TOKEN_ID_OPTIONS), stream=True,
        )  # fmt: skip
        parsed.append((reply.message, reply.finish_reason, reply.usage, reply.token_ids, reply.logprobs,
                       reply.prompt_token_ids))  # fmt: skip
    direct, through = openai_server.requests
    assert direct.json == through.json == {
        "model": "served", "messages": HI, "tools": [TOOL], "temperature": 0.3, "top_p": 0.9, "max_tokens": 64,
        "stop": ["\n\n"], "logprobs": True, "return_token_ids": True, "return_tokens_as_token_ids": True,
    }  # fmt: skip  # never streamed
    assert direct.headers["authorization"] == through.headers["authorization"] == "Bearer sk-k"
    assert parsed[0] == parsed[1]
    message, finish, usage, token_ids, logprobs, prompt_ids = parsed[0]
    assert message["tool_calls"][0]["function"] == {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}
    assert message["reasoning_content"] == "use the tool" and "content" not in message  # null fields dropped
    assert (finish, usage) == ("tool_calls", {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11})
    assert (token_ids, logprobs, prompt_ids) == ([11, 12], [-0.25, -0.5], [1, 2, 3])


FAILURES = {
    "429 with Retry-After": (Reply(status=429, headers={"retry-after": "3"}), ("rate_limit", True, 3.0)),
    "500": (Reply(status=500), ("server", True, None)),
    "503": (Reply(status=503), ("server", True, None)),
    "malformed JSON": (Reply(raw=b'{"id": "chatcmpl-1", "choices": [{'), ("server", True, None)),
    "dropped connection": (Reply(drop=True), ("connection", True, None)),
    "context length": (Reply(status=400, body=CONTEXT), ("context_window", False, None)),
    "401": (Reply(status=401), ("auth", False, None)),
    "404": (Reply(status=404), ("not_found", False, None)),
    "timeout": (Reply(delay=5), ("timeout", True, None)),
}


@pytest.mark.parametrize("failure", FAILURES)
async def test_every_failure_mode_is_classified_alike(
    openai_server: OpenAIServer, path: str, failure: str
) -> None:
    reply, (kind, transient, retry_after) = FAILURES[failure]
    openai_server.queue(reply)
    target = models.route("served", api_base=openai_server.url)
    assert target.via == ("openai" if path == "direct" else "litellm")
    with pytest.raises(ModelCallError) as caught:
        await models.complete(target, HI, timeout=0.5)
    error = caught.value
    assert (error.kind, error.transient, error.retry_after) == (kind, transient, retry_after)
    if reply.status >= 400:
        assert error.status == reply.status
    assert len(openai_server.requests) == 1


# -- the callers, on both paths ---------------------------------------------------------------------


class Waits:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def _client(url: str, waits: Waits) -> ExternalLLMClient:
    retry = RetryPolicy(max_attempts=3, base_delay=0.01, jitter=False, sleep=waits)
    return ExternalLLMClient("served", api_base=url, retry=retry, timeout=0.5)


@pytest.mark.parametrize(
    ("failure", "retried"),
    [("429 with Retry-After", True), ("500", True), ("malformed JSON", True), ("dropped connection", True),
     ("timeout", True)],
)  # fmt: skip
async def test_local_runs_retry_transient_failures(
    openai_server: OpenAIServer, path: str, failure: str, retried: bool
) -> None:
    openai_server.queue(FAILURES[failure][0], "ok")
    waits = Waits()
    client = _client(openai_server.url, waits)
    result = await client.chat_completions(HI)
    assert result.message == {"role": "assistant", "content": "ok"} and client.retries == 1
    assert waits.seconds == ([3.0] if failure == "429 with Retry-After" else [0.01])


@pytest.mark.parametrize(
    ("failure", "error", "kind", "requests"),
    [
        ("500", ProviderError, "server", 3),
        ("dropped connection", SystemicProviderError, "connection", 3),  # still nothing after the retries
        ("context length", ProviderError, "context_window", 1),
        ("401", SystemicProviderError, "auth", 1),
        ("404", SystemicProviderError, "not_found", 1),
    ],
)
async def test_local_runs_fail_alike(
    openai_server: OpenAIServer, path: str, failure: str, error: type[Exception], kind: str, requests: int
) -> None:
    openai_server.default = FAILURES[failure][0]
    client = _client(openai_server.url, Waits())
    with pytest.raises(ProviderError) as caught:
        await client.chat_completions(HI)
    assert type(caught.value) is error and caught.value.kind == kind
    assert len(openai_server.requests) == requests


async def test_a_reply_without_choices_is_a_bad_reply(openai_server: OpenAIServer, path: str) -> None:
    openai_server.queue(
        Reply(body={"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": []})
    )
    with pytest.raises(ProviderError) as caught:
        await _client(openai_server.url, Waits()).chat_completions(HI)
    assert caught.value.kind == "bad_reply"


def _judge_info(url: str) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-test", "api_base": url}


@pytest.mark.parametrize(
    ("failure", "outcome"),
    [
        ("429 with Retry-After", 0.5),
        ("malformed JSON", 0.5),
        ("dropped connection", 0.5),
        ("context length", ProviderRequestError),
        ("401", ProviderRequestError),
        ("404", ModelNotFoundError),
    ],
)
async def test_the_judge_retries_and_fails_alike(
    openai_server: OpenAIServer, path: str, failure: str, outcome: float | type[Exception]
) -> None:
    openai_server.queue(FAILURES[failure][0], VERDICT)
    waits = Waits()
    retry = JudgeRetryPolicy(max_attempts=3, base_delay=0.01, sleep=waits)
    if isinstance(outcome, float):
        assert await aevaluate_rubric("r", "x", _judge_info(openai_server.url), retry=retry) == outcome
        assert len(openai_server.requests) == 2
    else:
        with pytest.raises(outcome) as caught:
            await aevaluate_rubric("r", "x", _judge_info(openai_server.url), retry=retry)
        assert type(caught.value) is outcome and len(openai_server.requests) == 1
    if failure == "429 with Retry-After":
        assert waits.seconds == [3.0]


async def test_the_judge_sends_the_same_request_on_both_paths(openai_server: OpenAIServer, path: str) -> None:
    openai_server.queue(VERDICT)
    info = {**_judge_info(openai_server.url), "model": "o3-mini", "reasoning_effort": "low"}
    assert await aevaluate_rubric("r", "x", info, return_details=True, timeout=10) is not None
    sent = openai_server.requests[0].json
    assert sorted(sent) == ["messages", "model", "reasoning_effort", "response_format"]
    assert sent["model"] == "o3-mini" and sent["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    ("failure", "retryable"),
    [("429 with Retry-After", True), ("500", True), ("malformed JSON", True), ("dropped connection", True),
     ("context length", False), ("401", False)],
)  # fmt: skip
async def test_the_policy_fails_alike(
    openai_server: OpenAIServer, path: str, failure: str, retryable: bool
) -> None:
    openai_server.queue(FAILURES[failure][0])
    policy = LiteLLMPolicy("served", base_url=openai_server.url)
    with pytest.raises(PolicyError) as caught:
        await policy.generate(HI, tools=[TOOL], params={"temperature": 0.5})
    assert caught.value.retryable is retryable and "the policy backend 'served' failed" in str(caught.value)
    assert len(openai_server.requests) == 1  # one request per attempt of the agent's client
