"""API key resolution: explicit keys, provider variables, credential chains, key-less endpoints."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from osmosis_ai.rubric_eval import ensure_api_key_available

from osmosis_ai import MissingAPIKeyError, evaluate_rubric
from osmosis_ai.judge.keys import (
    CREDENTIAL_CHAIN_PROVIDERS,
    DEFAULT_API_KEY_ENV,
    NO_KEY_PLACEHOLDER,
    configured_api_base,
    resolve_api_key,
)
from tests.support.openai_server import OpenAIServer

KEYED = sorted(set(DEFAULT_API_KEY_ENV) - CREDENTIAL_CHAIN_PROVIDERS)


@pytest.mark.parametrize("provider", KEYED)
def test_each_provider_reads_its_own_variable(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingAPIKeyError, match=DEFAULT_API_KEY_ENV[provider]):
        resolve_api_key(provider, {})
    monkeypatch.setenv(DEFAULT_API_KEY_ENV[provider], f"  key-for-{provider}  ")
    assert resolve_api_key(provider, {}) == f"key-for-{provider}"


def test_explicit_key_and_custom_variable_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-default")
    monkeypatch.setenv("MY_JUDGE_KEY", "from-custom")
    assert resolve_api_key("openai", {"api_key": " explicit "}) == "explicit"
    assert resolve_api_key("openai", {"api_key_env": "MY_JUDGE_KEY"}) == "from-custom"
    with pytest.raises(MissingAPIKeyError, match="UNSET_JUDGE_KEY"):
        resolve_api_key("openai", {"api_key_env": "UNSET_JUDGE_KEY"})


@pytest.mark.parametrize("provider", sorted(CREDENTIAL_CHAIN_PROVIDERS))
def test_cloud_providers_use_their_own_credential_chain(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-not-a-key")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/path/to/creds.json")
    assert resolve_api_key(provider, {}) is None


def test_keyless_and_unlisted_providers_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_api_key("ollama", {}) is None
    assert resolve_api_key("openai", {"api_base": "http://127.0.0.1:1/v1"}) == NO_KEY_PLACEHOLDER
    assert resolve_api_key("nscale", {}) is None
    monkeypatch.setenv("NSCALE_API_KEY", "nsk")
    assert resolve_api_key("nscale", {}) == "nsk"  # LiteLLM's <PROVIDER>_API_KEY convention


def test_the_common_providers_need_their_key_under_any_name_litellm_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(MissingAPIKeyError, match="set GROQ_API_KEY in the environment"):
        resolve_api_key("groq", {"model": "llama-3.3-70b"})
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")  # LiteLLM's other name for a Gemini key
    assert resolve_api_key("gemini", {}) == "g-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    assert resolve_api_key("gemini", {}) == "gemini-key"  # the judge's own variable first


def test_ensure_api_key_available_fails_fast() -> None:
    with pytest.raises(TypeError, match="provider"):
        ensure_api_key_available({"model": "m"})  # type: ignore[typeddict-item]
    with pytest.raises(MissingAPIKeyError) as caught:
        ensure_api_key_available({"provider": "Anthropic", "model": "m"})
    assert str(caught.value) == (  # every command's missing-key line, word for word
        "model 'anthropic/m' cannot be used: no API key for its provider "
        "(set ANTHROPIC_API_KEY in the environment, or pass an API key)"
    )


def test_provider_key_variable_is_sent(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    evaluate_rubric("r", "x", {"provider": "openai", "model": "gpt-4o-mini", "api_base": openai_server.url})
    assert openai_server.requests[-1].headers["authorization"] == "Bearer sk-from-env"


@pytest.mark.parametrize("variable", ["OPENAI_API_BASE", "OPENAI_BASE_URL"])
def test_either_base_url_variable_points_a_key_less_judge_at_a_local_server(
    variable: str, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, openai_server.url)
    assert evaluate_rubric("r", "x", {"provider": "openai", "model": "judge"}) == 1.0
    assert openai_server.requests[-1].headers["authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"
    assert openai_server.requests[-1].json["model"] == "judge"


@pytest.mark.parametrize("variable", ["ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"])
def test_either_spelling_of_another_providers_base_needs_no_key(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(MissingAPIKeyError, match="ANTHROPIC_API_KEY"):
        resolve_api_key("anthropic", {})
    monkeypatch.setenv(variable, "http://127.0.0.1:1")
    assert resolve_api_key("anthropic", {}) == NO_KEY_PLACEHOLDER
    assert configured_api_base({"provider": "Anthropic"}) == "http://127.0.0.1:1"


@pytest.mark.parametrize("provider", ["hosted_vllm", "openai"])
def test_local_server_without_any_key(provider: str, openai_server: OpenAIServer) -> None:
    info: dict[str, Any] = {"provider": provider, "model": "local-judge", "api_base": openai_server.url}
    assert evaluate_rubric("r", "x", info) == 1.0
    assert openai_server.requests[-1].json["model"] == "local-judge"


def test_importing_the_rubric_modules_does_not_import_litellm() -> None:
    code = (
        "import sys, osmosis_ai.rubric_eval, osmosis_ai.rubric_types, osmosis_ai._litellm_compat; "
        "from osmosis_ai import evaluate_rubric, MissingAPIKeyError; "
        "print('litellm' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
