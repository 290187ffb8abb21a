"""The LiteLLM policy against the local OpenAI-compatible test server (real LiteLLM code path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from examples.calculator.agent import agent_loop as calculator_agent
from osmosis_ai.rollout import RolloutClientSettings, RolloutSettings, configure, reset_settings
from osmosis_ai.runs.rollouts import RunConfig, run_rollouts
from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.local_server import serve_agent_loop_locally
from osmosis_ai.traingate.policy import make_policy
from osmosis_ai.traingate.policy.litellm import LiteLLMPolicy
from tests.support.openai_server import OpenAIServer, Reply

ROWS = [
    {"system_prompt": "calc", "user_prompt": "What is 12 + 7?", "ground_truth": "19"},
    {"system_prompt": "calc", "user_prompt": "What is 6 * 7?", "ground_truth": "42"},
]


def _body(message: dict[str, Any], finish: str, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "message": message, "finish_reason": finish, **extra.pop("choice", {})}
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "m",
        "choices": [choice],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
        **extra,
    }


def provider(request: dict[str, Any]) -> Reply:
    """A calculator-solving 'model': a tool call, then (with backend token data) the final answer."""
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        answer = {"role": "assistant", "content": f"The answer is #### {messages[-1]['content']}"}
        return Reply(
            body=_body(
                answer,
                "stop",
                prompt_token_ids=[1, 2, 3],
                choice={
                    "token_ids": [7, 8],
                    "logprobs": {
                        "content": [
                            {"token": "a", "logprob": -0.25, "top_logprobs": []},
                            {"token": "b", "logprob": -0.5, "top_logprobs": []},
                        ]
                    },
                },
            )
        )
    a, op, b = messages[-1]["content"].removeprefix("What is ").rstrip("?").split()
    name = {"+": "add", "*": "multiply"}[op]
    call = {
        "id": "call_x",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"a": int(a), "b": int(b)})},
    }
    return Reply(body=_body({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"))


async def test_litellm_policy_with_tools_sampling_and_token_fallback(openai_server: OpenAIServer) -> None:
    openai_server.handler = provider
    policy = make_policy("test-model", base_url=openai_server.url, api_key="sk-local")
    assert isinstance(policy, LiteLLMPolicy)
    config = RunConfig("", timeout=30, completion_params={"temperature": 0.3, "max_tokens": 64})
    async with serve_agent_loop_locally(calculator_agent) as url, TrainGate(policy) as gate:
        config.server_url = url
        sessions = await run_rollouts(gate, ROWS, config)
    assert [(s.status, s.reward) for s in sessions] == [("COMPLETED", 1.0), ("COMPLETED", 1.0)]
    first, second = sessions[0].turns
    # The test server returns no token data on the tool turn: ids come from the byte tokenizer.
    assert first.token_source == "tokenizer:bytes" and first.token_ids and first.logprobs is None
    assert first.message["tool_calls"][0]["function"]["name"] == "add"
    assert first.usage == {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    # The final turn carries backend token data, which wins over the tokenizer.
    assert (second.token_ids, second.logprobs, second.prompt_token_ids) == ([7, 8], [-0.25, -0.5], [1, 2, 3])
    assert second.token_source == "backend"
    requests = [r for r in openai_server.requests if r.path.endswith("/chat/completions")]
    assert len(requests) == 4
    for recorded in requests:
        sent = recorded.json
        assert sent["model"] == "test-model"
        assert {t["function"]["name"] for t in sent["tools"]} == {"add", "subtract", "multiply", "divide"}
        assert sent["temperature"] == 0.3 and sent["max_tokens"] == 64 and sent["logprobs"] is True
        assert recorded.headers["authorization"] == "Bearer sk-local"


@pytest.mark.parametrize(("backend_status", "gateway_status"), [(400, 400), (503, 502)])
async def test_backend_failure_is_reported_per_rollout(
    openai_server: OpenAIServer, backend_status: int, gateway_status: int
) -> None:
    openai_server.default = Reply(status=backend_status)
    policy = make_policy("test-model", base_url=openai_server.url)
    configure(RolloutSettings(client=RolloutClientSettings(max_retries=0)))  # the agent's client: no retry
    try:
        async with serve_agent_loop_locally(calculator_agent) as url, TrainGate(policy) as gate:
            sessions = await run_rollouts(gate, ROWS[:1], RunConfig(url, timeout=30))
    finally:
        reset_settings()
    session = sessions[0]
    assert session.status == "ERROR"  # the agent's chat call failed and the server reported the error
    assert session.errors and "the policy backend 'test-model' failed" in session.errors[0]
    # Non-retryable provider errors are a 4xx for the agent's client (no retry), transient ones a 5xx.
    assert f"TrainGate answered {gateway_status} to POST" in (session.error_message or "")
    # One backend request per attempt of the agent's client: LiteLLM and the OpenAI SDK do not retry too.
    assert len([r for r in openai_server.requests if r.path.endswith("/chat/completions")]) == 1


SPY_IMPORT = """
import asyncio, sys, threading

on_main_thread = []


class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "litellm":
            on_main_thread.append(threading.current_thread() is threading.main_thread())
        return None


sys.meta_path.insert(0, Spy())
from osmosis_ai.traingate.policy import make_policy

policy = make_policy("openai/gpt-4o-mini")
generation = asyncio.run(policy.generate([{"role": "user", "content": "hi"}], tools=[], params={}))
print(on_main_thread, bool(generation.message["content"]))
"""


def test_first_generate_imports_litellm_off_the_event_loop(openai_server: OpenAIServer) -> None:
    env = {**os.environ, "OPENAI_API_BASE": openai_server.url, "OPENAI_API_KEY": "sk-local"}
    done = subprocess.run(
        [sys.executable, "-c", SPY_IMPORT], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[False] True"  # imported once, in a worker thread
