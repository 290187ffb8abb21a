"""The token policy seam: a policy generating from the token trace's prompt ids, through the real
gateway over loopback with a model directory's tokenizer and chat template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import chat_model as chat_models
from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.config.settings import RolloutClientSettings
from osmosis_ai.rollout.core.exceptions import OsmosisValidationError
from osmosis_ai.traingate.errors import PolicyError
from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.policy.base import Generation, Message
from osmosis_ai.traingate.policy.tokens import TokenPolicy, assistant_message, turn_limit
from osmosis_ai.traingate.tokenizer import ChatTokenizer

HI = [{"role": "user", "content": "hi"}]


class Echoing(TokenPolicy):
    """Answers ``reply N``; remembers every prompt it was given; the first call fails when asked to."""

    name = "echoing"

    def __init__(self, tokenizer: ChatTokenizer | None, fail_first: bool = False) -> None:
        self.tokenizer, self.fail_first = tokenizer, fail_first
        self.prompts: list[list[int]] = []

    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        self.prompts.append(list(prompt_ids))
        if self.fail_first and len(self.prompts) == 1:
            raise PolicyError("the model is busy")
        assert self.tokenizer is not None
        text = f"reply {len(self.prompts)}"
        return Generation(assistant_message(text), token_ids=self.tokenizer.encode(text + "<|im_end|>"))


def _client(gate: TrainGate, key: str) -> OsmosisLLMClient:
    settings = RolloutClientSettings(retry_base_delay=0.1)
    return OsmosisLLMClient(gate.url, "r1", api_key=key, timeout_seconds=5, max_retries=2, settings=settings)


async def test_the_policy_generates_from_the_traces_prompt_and_its_ids_are_recorded(tmp_path: Path) -> None:
    tokenizer = ChatTokenizer.from_directory(chat_models.write_model(tmp_path / "model"))
    policy = Echoing(tokenizer, fail_first=True)
    async with TrainGate(policy, tokenizer=tokenizer) as gate:
        session = gate.open_session("r1", HI, tools=[])
        async with _client(gate, session.callback_key) as client:
            first = await client.chat_completions(HI)  # fails once; the retry extends the same trace again
            second = await client.chat_completions([*HI, first.message, {"role": "user", "content": "more"}])
    assert (first.content, second.content) == ("reply 2", "reply 3")
    fresh = tokenizer.encode(tokenizer.render(HI, add_generation_prompt=True))
    assert policy.prompts[0] == policy.prompts[1] == fresh
    assert session.trace is not None
    assert policy.prompts[2] == session.trace.ids[: len(policy.prompts[2])]
    assert [t.token_ids for t in session.turns] == [first.token_ids, second.token_ids]
    assert [t.prompt_token_ids for t in session.turns] == policy.prompts[1:]
    assert session.trace.mask.count(1) == len(first.token_ids) + len(second.token_ids)
    assert session.violations == [] and session.trace.events == []


async def test_without_a_chat_template_every_call_fails_in_one_line() -> None:
    policy = Echoing(None)
    async with TrainGate(policy) as gate:
        session = gate.open_session("r1", HI, tools=[])
        async with _client(gate, session.callback_key) as client:
            with pytest.raises(OsmosisValidationError, match="the gateway has no chat template"):
                await client.chat_completions(HI)  # answered 400: asking again cannot help
    assert policy.prompts == [] and session.policy_errors == 1 and session.turns == []


def test_tool_calls_in_the_text_become_the_messages_tool_calls() -> None:
    message = assistant_message('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    assert message == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
        ],
    }


@pytest.mark.parametrize(
    ("limit", "params", "expected"),
    [
        (64, {"max_tokens": 16}, 16),
        (64, {"max_tokens": 128}, 64),  # a chat call can only lower the limit
        (64, {}, 64),
        (64, {"max_tokens": 0}, 64),
        (64, {"max_tokens": True}, 64),  # not a number of tokens
        (None, {"max_tokens": 16}, 16),
        (None, {}, None),
    ],
)
def test_a_chat_calls_max_tokens_only_lowers_the_turns_limit(
    limit: int | None, params: dict[str, Any], expected: int | None
) -> None:
    assert turn_limit(limit, params) == expected
