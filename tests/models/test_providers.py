"""Provider failures classified from LiteLLM's real exceptions, raised against the local stand-in."""

from __future__ import annotations

import pytest

from osmosis_ai.models.errors import ProviderCheckError
from osmosis_ai.models.providers import classify_provider_error, preflight, provider_message
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.sockets import free_port

MODEL = "openai/gpt-4o-mini"


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (403, "auth"), (404, "not_found")])
async def test_systemic_answers_stop_the_preflight(
    openai_server: OpenAIServer, status: int, kind: str
) -> None:
    openai_server.default = Reply(status=status)
    with pytest.raises(ProviderCheckError) as caught:
        await preflight(MODEL, {"api_base": openai_server.url, "api_key": "k"})
    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert str(caught.value).endswith(f"(HTTP {status}: scripted error {status})")
    assert len(openai_server.requests) == 1 and openai_server.requests[0].json["max_tokens"] == 1


@pytest.mark.parametrize("status", [200, 400, 429, 500, 503])
async def test_other_answers_let_the_run_go_on(openai_server: OpenAIServer, status: int) -> None:
    openai_server.default = Reply(status=status)
    await preflight(MODEL, {"api_base": openai_server.url, "api_key": "k"})
    assert len(openai_server.requests) == 1  # no retries in a preflight


async def test_unreachable_endpoint_and_unroutable_model() -> None:
    with pytest.raises(ProviderCheckError, match="endpoint does not answer") as caught:
        await preflight(MODEL, {"api_base": f"http://127.0.0.1:{free_port()}/v1", "api_key": "k"})
    assert caught.value.kind == "connection"
    with pytest.raises(ProviderCheckError, match="use provider/model") as caught:
        await preflight("no-such-provider/x", {"api_key": "k"})
    assert caught.value.kind == "config"


async def test_row_failures_are_classified_from_real_exceptions(openai_server: OpenAIServer) -> None:
    from osmosis_ai._litellm import aimport_litellm

    litellm = await aimport_litellm()
    seen = {}
    for status in (429, 400, 500):
        openai_server.queue(Reply(status=status))
        try:
            await litellm.acompletion(
                model=MODEL,
                messages=[{"role": "user", "content": "hi"}],
                api_base=openai_server.url,
                api_key="k",
                num_retries=0,
                max_retries=0,
            )
        except Exception as exc:
            seen[status] = classify_provider_error(exc)
    assert {s: (f.kind, f.systemic) for s, f in seen.items()} == {
        429: ("rate_limit", False),
        400: ("bad_request", False),
        500: ("server", False),
    }
    assert seen[400].message == "scripted error 400"


def test_provider_message_is_cleaned_and_cut() -> None:
    exc = RuntimeError(
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - bad key\nTraceback ..."
    )
    assert provider_message(exc) == "bad key"
    assert provider_message(RuntimeError("x" * 300)) == "x" * 200 + "..."
    assert provider_message(RuntimeError("")) == "RuntimeError"
