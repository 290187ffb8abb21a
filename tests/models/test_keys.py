"""``osmosis_ai.models.keys``: the common providers' key variables, read without LiteLLM, agree with it."""

from __future__ import annotations

import os
import sys

import pytest

from osmosis_ai.models import litellm as via_litellm
from osmosis_ai.models.keys import PROVIDER_KEYS, base_url_variables, missing_key_variables


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_API_BASE", "_BASE_URL", "_TOKEN")) or name.startswith("XAI_OAUTH"):
            monkeypatch.delenv(name)


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider key or base URL in the environment, and LiteLLM taken as not imported yet."""
    _clear(monkeypatch)
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    return monkeypatch


@pytest.mark.parametrize("provider", sorted(PROVIDER_KEYS))
def test_the_variables_named_are_litellms(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _clear(monkeypatch)
    model = f"{provider}/some-model"
    with monkeypatch.context() as before_litellm:
        before_litellm.delitem(sys.modules, "litellm", raising=False)
        names = missing_key_variables(model)
    assert names == list(PROVIDER_KEYS[provider].named)
    assert via_litellm.missing_keys(model) == names


@pytest.mark.parametrize("provider", sorted(PROVIDER_KEYS))
def test_any_accepted_variable_is_a_key(provider: str, bare_env: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_KEYS[provider].accepted:
        bare_env.setenv(name, "k")
        assert missing_key_variables(f"{provider}/m") == []
        bare_env.delenv(name)
    bare_env.setenv(PROVIDER_KEYS[provider].named[0], "  ")  # blank: no key
    assert missing_key_variables(f"{provider}/m") == list(PROVIDER_KEYS[provider].named)


@pytest.mark.parametrize("variable", ["OPENAI_API_BASE", "OPENAI_BASE_URL"])
def test_a_base_url_in_the_environment_leaves_the_answer_to_litellm(
    variable: str, bare_env: pytest.MonkeyPatch
) -> None:
    bare_env.setenv(variable, "http://127.0.0.1:1/v1")
    assert missing_key_variables("openai/gpt-4o-mini") is None
    assert missing_key_variables("anthropic/claude-sonnet-4-5") == ["ANTHROPIC_API_KEY"]
    assert set(base_url_variables("together_ai")) >= {"TOGETHER_AI_API_BASE", "TOGETHERAI_BASE_URL"}


def test_unknown_providers_bare_names_and_a_loaded_litellm_are_left_to_litellm(
    bare_env: pytest.MonkeyPatch,
) -> None:
    assert missing_key_variables("bedrock/anthropic.claude-v2") is None  # other sign-in
    assert missing_key_variables("vertex_ai/gemini-pro") is None
    assert missing_key_variables("gpt-4o-mini") is None  # routes always carry the provider
    bare_env.setitem(sys.modules, "litellm", object())  # code may have set litellm.api_key
    assert missing_key_variables("openai/gpt-4o-mini") is None
