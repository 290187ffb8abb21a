"""The API-key variables of the common providers, read without importing LiteLLM.

Importing LiteLLM takes seconds, and a run without its key should say so at once.
:func:`missing_key_variables` tells, from the environment alone, that a model of a provider in
:data:`PROVIDER_KEYS` has no key; it answers ``None`` ("ask LiteLLM") whenever LiteLLM might accept
the model without that key: a base URL in the environment (``<PROVIDER>_API_BASE`` /
``<PROVIDER>_BASE_URL``), a provider outside the table (other sign-in methods included), or LiteLLM
already imported (code may have set its module-level keys). The variables named are LiteLLM's own
(its ``validate_environment``), so the line reads the same whichever of the two answers it.
:func:`key_hint` words what to do, for every command's missing-key line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderKeys:
    """``named``: the variables a missing-key line names (any one will do); ``also``: other variables
    LiteLLM reads the key (or another sign-in) from."""

    named: tuple[str, ...]
    also: tuple[str, ...] = ()

    @property
    def accepted(self) -> tuple[str, ...]:
        return self.named + self.also


PROVIDER_KEYS: dict[str, ProviderKeys] = {
    "openai": ProviderKeys(("OPENAI_API_KEY",)),
    "anthropic": ProviderKeys(("ANTHROPIC_API_KEY",), ("ANTHROPIC_AUTH_TOKEN",)),
    "gemini": ProviderKeys(("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    "mistral": ProviderKeys(("MISTRAL_API_KEY",), ("MISTRAL_AZURE_API_KEY",)),
    "groq": ProviderKeys(("GROQ_API_KEY",)),
    "together_ai": ProviderKeys(
        ("TOGETHERAI_API_KEY",), ("TOGETHER_API_KEY", "TOGETHER_AI_API_KEY", "TOGETHER_AI_TOKEN")
    ),
    "deepseek": ProviderKeys(("DEEPSEEK_API_KEY",)),
    "xai": ProviderKeys(
        ("XAI_API_KEY",), ("XAI_OAUTH_TOKEN_DIR", "XAI_OAUTH_AUTH_FILE", "XAI_OAUTH_API_BASE")
    ),
    "openrouter": ProviderKeys(("OPENROUTER_API_KEY",), ("OR_API_KEY",)),
    "cerebras": ProviderKeys(("CEREBRAS_API_KEY",)),
    "perplexity": ProviderKeys(("PERPLEXITYAI_API_KEY",), ("PERPLEXITY_API_KEY",)),
    "deepinfra": ProviderKeys(("DEEPINFRA_API_KEY",)),
    "fireworks_ai": ProviderKeys(
        ("FIREWORKS_AI_API_KEY",), ("FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY", "FIREWORKS_AI_TOKEN")
    ),
}


def _set(name: str) -> bool:
    return bool(os.environ.get(name, "").strip())


def base_url_variables(provider: str) -> tuple[str, ...]:
    """The variables that point ``provider``'s requests at another address (both spellings LiteLLM reads)."""
    prefixes = dict.fromkeys((provider.upper(), provider.upper().replace("_", "")))
    return tuple(f"{prefix}_{suffix}" for prefix in prefixes for suffix in ("API_BASE", "BASE_URL"))


def missing_key_variables(model_id: str) -> list[str] | None:
    """The key variables ``model_id`` (``provider/name``) needs and the environment lacks.

    ``[]`` when one is set; ``None`` when the environment alone cannot tell (see the module docstring).
    """
    provider, slash, _ = model_id.partition("/")
    keys = PROVIDER_KEYS.get(provider) if slash else None
    if keys is None or "litellm" in sys.modules:
        return None
    if any(_set(name) for name in keys.accepted):
        return []
    if any(_set(name) for name in base_url_variables(provider)):
        return None
    return list(keys.named)


def key_hint(variables: Sequence[str]) -> str:
    """What to do about a missing key: the words every command's missing-key line ends with."""
    return f"set {' or '.join(variables)} in the environment, or pass an API key"
