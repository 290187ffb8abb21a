"""InteractiveLLMClient around the real ExternalLLMClient, answered by the OpenAI stand-in."""

from __future__ import annotations

import pytest

from osmosis_ai.runs.executors.interactive import InteractiveLLMClient, InteractiveStep, parse_arguments
from osmosis_ai.runs.executors.model_client import ExternalLLMClient
from tests.support.openai_server import OpenAIServer, Reply

HELLO = [{"role": "user", "content": "hi"}]


async def test_each_answer_is_reported_and_a_refusal_aborts_the_row(openai_server: OpenAIServer) -> None:
    openai_server.default = Reply(content="hello")
    steps: list[InteractiveStep] = []
    seen: list[list[dict[str, object]]] = []
    answers = iter([True, False])

    async def on_step(step: InteractiveStep) -> bool:
        steps.append(step)
        return next(answers)

    client = InteractiveLLMClient(
        ExternalLLMClient("m", api_base=openai_server.url), on_step, on_messages_updated=seen.append
    )
    client.reset_metrics()
    result = await client.chat_completions(HELLO)
    assert result.message["content"] == "hello"
    with pytest.raises(InterruptedError):
        await client.chat_completions(HELLO)
    with pytest.raises(InterruptedError):  # aborted: no further call reaches the model
        await client.chat_completions(HELLO)
    assert [(s.turn, s.step_type, s.message["content"], s.finish_reason) for s in steps] == [
        (1, "llm_response", "hello", "stop"),
        (2, "llm_response", "hello", "stop"),
    ]
    assert seen == [HELLO, HELLO] and len(openai_server.requests) == 2
    assert client.get_metrics().num_llm_calls == 2
    client.reset_metrics()  # the next row starts afresh
    assert (client.turn, client.aborted, client.get_metrics().num_llm_calls) == (0, False, 0)


def test_tool_arguments_are_decoded_when_they_are_json() -> None:
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("not json") == "not json"
    assert parse_arguments({"a": 1}) == {"a": 1}
