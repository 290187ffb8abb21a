"""Chat calls to the gateway over loopback: retried calls (Idempotency-Key) and the reply on the wire."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.config.settings import RolloutClientSettings
from osmosis_ai.rollout.core.schemas import CompletionsResponse
from osmosis_ai.traingate.append_only import canonical
from osmosis_ai.traingate.errors import PolicyError
from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.policy.base import Generation, Message, Policy
from osmosis_ai.traingate.policy.scripted import ScriptedPolicy

HI = [{"role": "user", "content": "hi"}]


class SlowFirstPolicy(Policy):
    """Numbers its replies; the first generation takes ``delay`` s (longer than the client waits)."""

    name = "slow-first"

    def __init__(self, delay: float = 0.0, fail_first: bool = False) -> None:
        self.delay = delay
        self.fail_first = fail_first
        self.calls = 0

    async def generate(
        self, messages: list[Message], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        self.calls += 1
        if self.calls == 1 and self.fail_first:
            raise PolicyError("backend overloaded")
        if self.calls == 1:
            await asyncio.sleep(self.delay)
        return Generation({"role": "assistant", "content": f"reply {self.calls}"})


def _client(gate: TrainGate, key: str, *, timeout: float = 5.0) -> OsmosisLLMClient:
    settings = RolloutClientSettings(retry_base_delay=0.1)
    return OsmosisLLMClient(
        gate.url, "r1", api_key=key, timeout_seconds=timeout, max_retries=2, settings=settings
    )


async def test_a_retried_chat_call_gets_the_first_answer_and_is_recorded_once() -> None:
    # The first attempt gives up after 1 s; its retry finds the generation still running and gets its
    # answer at 1.5 s. The margins (0.5 s, and 1 s for the second call) are for a busy machine.
    policy = SlowFirstPolicy(delay=1.5)
    async with TrainGate(policy) as gate:
        session = gate.open_session("r1", HI, tools=[])
        async with _client(gate, session.callback_key, timeout=1.0) as client:
            first = await client.chat_completions(HI)  # times out once, the retry waits for the first answer
            second = await client.chat_completions([*HI, first.message, {"role": "user", "content": "again"}])
    assert first.content == "reply 1" and second.content == "reply 2"
    assert policy.calls == 2
    assert [(t.index, t.message["content"]) for t in session.turns] == [(0, "reply 1"), (1, "reply 2")]
    assert session.violations == []


async def test_a_failed_first_attempt_is_generated_again_on_retry() -> None:
    policy = SlowFirstPolicy(fail_first=True)
    async with TrainGate(policy) as gate:
        session = gate.open_session("r1", HI, tools=[])
        async with _client(gate, session.callback_key) as client:
            reply = await client.chat_completions(HI)  # 502, then the retry (same key) generates
    assert reply.content == "reply 2" and policy.calls == 2
    assert [t.message["content"] for t in session.turns] == ["reply 2"]


async def test_calls_without_the_header_and_with_new_keys_each_generate() -> None:
    policy = SlowFirstPolicy()
    async with TrainGate(policy) as gate, aiohttp.ClientSession() as http:
        session = gate.open_session("r1", HI, tools=[])
        auth = {"Authorization": f"Bearer {session.callback_key}"}
        body = {"rollout_id": "r1", "messages": HI}
        for extra in ({}, {}, {"Idempotency-Key": "a"}, {"Idempotency-Key": "b"}, {"Idempotency-Key": "b"}):
            async with http.post(
                f"{gate.url}/v1/chat/completions", json=body, headers={**auth, **extra}
            ) as r:
                assert r.status == 200
        assert policy.calls == 4 and session.num_turns == 4
        assert list(session.replies) == ["a", "b"]
        session.finish("COMPLETED")
        assert session.replies == {}  # remembered answers go with the session


async def test_reply_is_a_completions_response_with_token_data() -> None:
    async with TrainGate(ScriptedPolicy()) as gate, aiohttp.ClientSession() as http:
        session = gate.open_session("r1", [{"role": "user", "content": "What is 2 + 3?"}], tools=[])
        auth = {"Authorization": f"Bearer {session.callback_key}"}
        async with http.post(
            f"{gate.url}/v1/chat/completions",
            json={"rollout_id": "r1", "messages": session.messages},
            headers=auth,
        ) as r:
            assert r.status == 200
            body = await r.json()
    assert CompletionsResponse.model_validate(body).model_dump(mode="json") == body
    turn = session.turns[0]
    assert body["token_ids"] == turn.token_ids and body["logprobs"] == turn.logprobs
    assert body["prompt_token_ids"] == turn.prompt_token_ids
    assert body["usage"] == turn.usage and body["choices"][0]["message"] == turn.message
    # The append-only check's cache holds the canonical JSON of the conversation it expects next.
    assert session.expected_keys == [canonical(m) for m in session.expected]
    assert len(session.expected) == 2


async def test_a_template_that_refuses_the_conversation_is_reported_and_the_rollout_goes_on(
    tmp_path: Any,
) -> None:
    from benchmarks import chat_model
    from osmosis_ai.traingate.tokenizer import ChatTokenizer

    refusing = "{% for m in messages %}{{ m.content }}{% endfor %}{{ raise_exception('no tools here') }}"
    tokenizer = ChatTokenizer.from_directory(chat_model.write_model(tmp_path / "m", refusing))
    async with TrainGate(ScriptedPolicy(), tokenizer=tokenizer) as gate:
        session = gate.open_session("r1", HI, tools=[])
        async with _client(gate, session.callback_key) as client:
            reply = await client.chat_completions(HI)
    assert reply.token_ids and session.turns[0].token_source == f"tokenizer:{tokenizer.name}"
    assert session.trace is not None and "no tools here" in (session.trace.broken or "")
    assert session.errors == [f"turn 0: {session.trace.broken}"]
    assert "chat template" in session.errors[0]
