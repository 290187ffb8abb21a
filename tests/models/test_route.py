"""Routing decided once, the same for every caller: named providers vs an OpenAI-compatible base URL."""

from __future__ import annotations

import pytest

from osmosis_ai.models.complete import NO_KEY, Route, route
from osmosis_ai.runs.executors.model_client import ExternalLLMClient
from osmosis_ai.traingate.policy import make_policy
from tests.support.openai_server import OpenAIServer

BASE = "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("model", "api_base", "expected"),
    [
        ("gpt-4o-mini", None, Route("openai/gpt-4o-mini")),  # a bare name is OpenAI's
        ("anthropic/claude-sonnet-4-5", None, Route("anthropic/claude-sonnet-4-5")),
        ("local-model", BASE, Route("openai/local-model", BASE, NO_KEY, "openai")),
        ("openai/local-model", BASE, Route("openai/local-model", BASE, NO_KEY, "openai")),
        ("hosted_vllm/Qwen/Qwen2.5-7B", BASE, Route("openai/Qwen/Qwen2.5-7B", BASE, NO_KEY, "openai")),
        ("Qwen/Qwen2.5-7B", BASE, Route("openai/Qwen/Qwen2.5-7B", BASE, NO_KEY, "openai")),  # an organisation
        ("ollama/qwen2.5", BASE, Route("ollama/qwen2.5", BASE)),  # a provider with its own API there
        ("openai/responses/gpt-5", BASE, Route("openai/responses/gpt-5", BASE)),
        ("scripted", None, Route("scripted", via="scripted")),
    ],
)  # fmt: skip
def test_routes(model: str, api_base: str | None, expected: Route) -> None:
    assert route(model, api_base=api_base) == expected
    assert route(model, api_base=api_base) == expected  # the same every time


def test_litellm_can_be_forced_for_a_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    forced = Route("openai/local-model", BASE, NO_KEY, "litellm")
    assert route("local-model", api_base=BASE, force_litellm=True) == forced
    monkeypatch.setenv("OSMOSIS_FORCE_LITELLM", "1")
    assert route("local-model", api_base=BASE) == forced
    assert route("local-model", api_base=BASE, force_litellm=False).via == "openai"  # the keyword wins
    monkeypatch.setenv("OSMOSIS_FORCE_LITELLM", "0")
    assert route("local-model", api_base=BASE).via == "openai"


def test_a_given_key_is_kept_and_never_shown() -> None:
    target = route("local-model", api_base=BASE, api_key="sk-secret")
    assert target.api_key == "sk-secret" and "sk-secret" not in repr(target)


async def test_a_key_less_base_url_works_alike_for_local_runs_and_the_policy(
    openai_server: OpenAIServer,
) -> None:
    client = ExternalLLMClient("openai/local-model", api_base=openai_server.url)
    await client.chat_completions([{"role": "user", "content": "hi"}])
    policy = make_policy("openai/local-model", base_url=openai_server.url)
    await policy.generate([{"role": "user", "content": "hi"}], tools=[], params={})
    first, second = openai_server.requests
    assert first.json["model"] == second.json["model"] == "local-model"
    assert first.headers["authorization"] == second.headers["authorization"] == f"Bearer {NO_KEY}"


async def test_a_reply_larger_than_the_cap_is_not_read_whole(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from osmosis_ai.models import openai_compat
    from osmosis_ai.models.errors import ModelCallError
    from tests.support.openai_server import Reply

    MODEL, HI = "local-model", [{"role": "user", "content": "hi"}]
    monkeypatch.setattr(openai_compat, "MAX_REPLY_BYTES", 100_000)
    openai_server.default = Reply(content="x" * 200_000)
    with pytest.raises(ModelCallError, match=r"larger than 100,000 bytes") as raised:
        await openai_compat.acomplete(
            MODEL, HI, api_base=openai_server.url, api_key="k", timeout=10, params={}
        )
    assert raised.value.kind == "server"
    openai_server.default = Reply(content="x" * 1000)  # under the cap: read as ever
    reply = await openai_compat.acomplete(
        MODEL, HI, api_base=openai_server.url, api_key="k", timeout=10, params={}
    )
    assert reply["choices"][0]["message"]["content"] == "x" * 1000


async def test_credentials_in_the_base_url_are_sent_as_basic_auth_and_kept_out_of_messages(
    openai_server: OpenAIServer,
) -> None:
    import base64

    from osmosis_ai.models import openai_compat

    base = openai_server.url.replace("http://", "http://proxy-user:s%40cret@")
    hi = [{"role": "user", "content": "hi"}]
    reply = await openai_compat.acomplete(
        "local-model", hi, api_base=base, api_key="k", timeout=10, params={}
    )
    assert reply["choices"][0]["message"]["content"]
    sent = openai_server.requests[-1].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(b"proxy-user:s@cret").decode()
    from osmosis_ai.models.errors import ModelCallError
    from tests.support.sockets import free_port

    nowhere = f"http://proxy-user:s3cret-pw@127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelCallError) as refused:
        await openai_compat.acomplete("local-model", hi, api_base=nowhere, api_key="k", timeout=5, params={})
    assert refused.value.kind == "connection" and "s3cret-pw" not in str(refused.value)
