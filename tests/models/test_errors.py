"""The one classification, from LiteLLM's real exceptions: an auth failure is one whatever status
LiteLLM reports it under; the preflight names a missing key before sending anything."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_ai.models import complete as models
from osmosis_ai.models.errors import ModelCallError, model_error
from tests.support.openai_server import OpenAIServer, Reply

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("model", "reported_as"),
    [
        ("openai/gpt-4o-mini", "InternalServerError"),  # a 500, which retrying could never cure
        ("anthropic/claude-sonnet-4-5", "AuthenticationError"),
        ("gemini/gemini-2.0-flash", "APIConnectionError"),
    ],
)
async def test_missing_credentials_are_auth_failures_whatever_litellm_calls_them(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, model: str, reported_as: str
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", openai_server.url)
    monkeypatch.setenv("ANTHROPIC_API_BASE", openai_server.url.removesuffix("/v1"))
    with pytest.raises(ModelCallError) as caught:
        await models.complete(models.route(model), HI, timeout=10)
    error = caught.value
    assert type(error.__cause__).__name__ == reported_as
    assert (error.kind, error.systemic, error.transient) == ("auth", True, False)
    assert openai_server.requests == []  # LiteLLM refused before sending


@pytest.mark.parametrize(
    ("model", "variables"),
    [
        ("openai/gpt-4o-mini", "OPENAI_API_KEY"),
        ("gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.0-flash", "GOOGLE_API_KEY or GEMINI_API_KEY"),
    ],
)
async def test_the_preflight_names_the_missing_key_and_sends_nothing(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, model: str, variables: str
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", openai_server.url)
    with pytest.raises(ModelCallError) as caught:
        await models.preflight(models.route(model))
    assert caught.value.kind == "missing_key" and caught.value.systemic
    assert str(caught.value) == f"set {variables} in the environment, or pass an API key"
    assert openai_server.requests == []


async def test_no_key_is_asked_of_key_less_routes(openai_server: OpenAIServer) -> None:
    await models.preflight(models.route("local-model", api_base=openai_server.url))  # a placeholder is sent
    await models.preflight(models.route("scripted"))  # offline: nothing is sent
    await models.preflight(models.route("openai/gpt-4o-mini", api_key="sk-given", api_base=openai_server.url))
    assert [r.headers["authorization"] for r in openai_server.requests] == ["Bearer EMPTY", "Bearer sk-given"]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(status=401), "auth"),
        (Reply(status=403), "auth"),
        (Reply(status=404), "not_found"),
        (Reply(status=408), "timeout"),
        (Reply(status=429), "rate_limit"),
        (Reply(status=500), "server"),
        (Reply(status=503), "server"),
        (Reply(status=400), "bad_request"),
        (Reply(status=429, body={"error": {"message": "You exceeded your current quota, check your plan"}}), "budget"),
        (Reply(status=400, body={"error": {"message": "This model's maximum context length is 4096 tokens"}}), "context_window"),
        (Reply(status=500, body={"error": {"message": "Incorrect API key provided: sk-..."}}), "auth"),
    ],
)  # fmt: skip
async def test_answers_are_classified(openai_server: OpenAIServer, reply: Reply, kind: str) -> None:
    openai_server.queue(reply)
    with pytest.raises(ModelCallError) as caught:
        await models.complete(
            models.route("openai/m", api_key="k", api_base=openai_server.url), HI, timeout=10
        )
    assert caught.value.kind == kind and caught.value.status == reply.status
    assert caught.value.transient == (kind in ("timeout", "rate_limit", "server"))


def test_retry_after_and_the_provider_words_are_kept() -> None:
    class RateLimitError(Exception):
        status_code = 429

        def __init__(self, message: str) -> None:
            super().__init__(message)
            self.litellm_response_headers = {"retry-after": "7"}

    error = model_error(RateLimitError("litellm.RateLimitError: RateLimitError: OpenAIException - slow down"))
    assert (error.kind, error.retry_after, error.message) == ("rate_limit", 7.0, "slow down")
    assert model_error(error) is error


class _Handler:
    """A LiteLLM custom provider whose call raises ``error``: LiteLLM's own wrapping of it is real."""

    def __new__(cls, error: BaseException) -> Any:
        from litellm import CustomLLM

        class Raising(CustomLLM):
            async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
                raise error

        return Raising()


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (AttributeError("'ModelResponse' object has no attribute 'service_tier'"), "client"),
        (ConnectionRefusedError(111, "Connection refused"), "connection"),
    ],
)
async def test_litellm_failing_in_its_own_code_is_not_an_endpoint_that_does_not_answer(
    monkeypatch: pytest.MonkeyPatch, error: BaseException, kind: str
) -> None:
    import litellm

    from osmosis_ai.models.errors import ProviderCheckError
    from osmosis_ai.models.providers import preflight

    provider = f"raising-{kind}"
    monkeypatch.setattr(
        litellm, "custom_provider_map", [{"provider": provider, "custom_handler": _Handler(error)}]
    )
    with pytest.raises(ModelCallError) as caught:
        await models.complete(models.route(f"{provider}/m"), HI, timeout=10)
    assert type(caught.value.__cause__).__name__ == "APIConnectionError"  # LiteLLM's class for both
    assert caught.value.kind == kind and caught.value.transient == (kind == "connection")
    with pytest.raises(ProviderCheckError) as stopped:  # both stop the run before its first row
        await preflight(f"{provider}/m", {})
    if kind == "client":
        assert str(stopped.value) == (
            f"model '{provider}/m' cannot be used: LiteLLM fails in its own code on this provider's answer, "
            "not at the provider; try another litellm version, or openai/MODEL with the base URL if the "
            "endpoint speaks the OpenAI API ('ModelResponse' object has no attribute 'service_tier')"
        )
    else:
        assert "the provider's endpoint does not answer" in str(stopped.value)
