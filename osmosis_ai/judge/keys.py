"""Which API key a judge call uses, and the error that says how to provide a missing one.

Resolution for ``model_info`` (first match wins):

1. ``api_key`` in ``model_info`` (non-blank);
2. the variable named by ``api_key_env``; set but blank or unset is an error, because the user
   asked for it explicitly;
3. providers that authenticate through their own credential chain (``bedrock``, ``vertex_ai``,
   ``sagemaker``): no key; LiteLLM reads AWS / Google credentials itself;
4. the provider's default variable (:data:`DEFAULT_API_KEY_ENV`, else ``<PROVIDER>_API_KEY``, the
   convention LiteLLM follows) when it is set, else any other variable LiteLLM reads the provider's
   key from (:data:`osmosis_ai.models.keys.PROVIDER_KEYS`);
5. no key needed: with an ``api_base`` (see :func:`configured_api_base`; a placeholder key is sent,
   since OpenAI-style clients insist on one), for a key-less local provider
   (``ollama``, ``hosted_vllm``, ``lm_studio``, ...), or for a provider outside both tables (LiteLLM
   reports its own authentication error if one turns out to be needed);
6. otherwise :class:`MissingAPIKeyError`, worded like every command's missing-key line (the
   model, then the variable to set).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from osmosis_ai.judge.errors import JudgeInputError, MissingAPIKeyError
from osmosis_ai.models.complete import NO_KEY
from osmosis_ai.models.errors import describe
from osmosis_ai.models.keys import PROVIDER_KEYS, key_hint

DEFAULT_API_KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "xai": "XAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "google": "GEMINI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "azure": "AZURE_API_KEY",
    "bedrock": "AWS_ACCESS_KEY_ID",
    "vertex_ai": "GOOGLE_APPLICATION_CREDENTIALS",
}

CREDENTIAL_CHAIN_PROVIDERS = frozenset({"bedrock", "vertex_ai", "sagemaker"})
# Sent to a self-hosted endpoint that needs no key: OpenAI-style clients refuse to send no key at all.
NO_KEY_PLACEHOLDER = NO_KEY
KEYLESS_PROVIDERS = frozenset(
    {"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile", "xinference", "triton"}
)


def _nonblank(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _missing(provider: str, model_info: Mapping[str, Any], variables: list[str]) -> MissingAPIKeyError:
    """The error every command words the same way: the judge's model and the variables to set."""
    model = _nonblank(model_info.get("model"))
    if model is None or model.lower().startswith(f"{provider}/"):
        shown = model or provider
    else:
        shown = f"{provider}/{model}"
    return MissingAPIKeyError(describe(shown, "missing_key", key_hint(variables)))


def default_key_env(provider: str) -> str:
    """The environment variable that holds ``provider``'s key by default."""
    return DEFAULT_API_KEY_ENV.get(provider) or f"{provider.upper()}_API_KEY"


def resolve_api_key(provider: str, model_info: Mapping[str, Any]) -> str | None:
    """Return the key to send for ``provider`` (normalised lower-case), or ``None`` when none is needed.

    Raises:
        MissingAPIKeyError: a key is needed and none is configured.
    """
    explicit = _nonblank(model_info.get("api_key"))
    if explicit:
        return explicit
    env_name = _nonblank(model_info.get("api_key_env"))
    if env_name:
        value = _nonblank(os.environ.get(env_name))
        if value is None:
            raise _missing(provider, model_info, [env_name])
        return value
    if provider in CREDENTIAL_CHAIN_PROVIDERS:
        return None
    default_env = default_key_env(provider)
    known = PROVIDER_KEYS.get(provider)
    for name in (default_env, *(known.accepted if known else ())):
        value = _nonblank(os.environ.get(name))
        if value is not None:
            return value
    if configured_api_base(model_info, provider) is not None:
        return NO_KEY_PLACEHOLDER
    if provider in KEYLESS_PROVIDERS or (provider not in DEFAULT_API_KEY_ENV and known is None):
        return None
    raise _missing(provider, model_info, list(known.named) if known else [default_env])


def configured_api_base(model_info: Mapping[str, Any], provider: str | None = None) -> str | None:
    """The base URL the judge of ``model_info`` is sent to, ``None`` for its provider's own API.

    ``api_base`` in ``model_info``, else ``<PROVIDER>_API_BASE`` or ``<PROVIDER>_BASE_URL`` from the
    environment: LiteLLM reads both spellings (and the OpenAI SDK only ``OPENAI_BASE_URL``), so
    either one points the judge elsewhere. ``provider`` defaults to ``model_info['provider']``.
    """
    given = _nonblank(model_info.get("api_base"))
    prefix = (_nonblank(provider if provider is not None else model_info.get("provider")) or "").upper()
    if given is not None or not prefix:
        return given
    return _nonblank(os.environ.get(f"{prefix}_API_BASE")) or _nonblank(os.environ.get(f"{prefix}_BASE_URL"))


def ensure_api_key_available(model_info: Mapping[str, Any]) -> None:
    """Fail fast, before any call, when ``model_info`` names no provider or lacks a needed key.

    Raises:
        JudgeInputError: ``provider`` is missing or blank (a ``TypeError``).
        MissingAPIKeyError: the provider needs a key and none is configured.
    """
    provider = _nonblank(model_info.get("provider")) if isinstance(model_info, Mapping) else None
    if provider is None:
        raise JudgeInputError("model_info must include a non-empty 'provider' string")
    resolve_api_key(provider.lower(), model_info)
