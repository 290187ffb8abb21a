"""How a ``(provider, model)`` pair maps onto LiteLLM: model id, default timeout, output format."""

from __future__ import annotations

import functools
import re
from typing import Any

from osmosis_ai._litellm import import_litellm

DEFAULT_REQUEST_TIMEOUT_SECONDS = 30.0

_PROVIDER_TIMEOUTS = {"xai": 45.0, "gemini": 45.0, "cerebras": 60.0, "openrouter": 60.0}

VERDICT_SCHEMA: dict[str, Any] = {
    "name": "reward_rubric_response",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"score": {"type": "number"}, "explanation": {"type": "string"}},
        "required": ["score", "explanation"],
        "additionalProperties": False,
    },
}


def litellm_model_id(provider: str, model: str) -> str:
    """LiteLLM's id for ``model`` at ``provider``; OpenAI's gpt-5 family uses the Responses route.

    A model that already carries the provider prefix (``openai/gpt-4o``) is not prefixed twice.
    """
    if not provider:
        return model
    if model.lower().startswith(f"{provider}/"):
        model = model[len(provider) + 1 :]
    if provider == "openai" and model.lower().startswith("gpt-5"):
        return f"openai/responses/{model}"
    return f"{provider}/{model}"


def default_timeout(provider: str, model: str) -> float:
    """Seconds to wait for ``model`` when the caller did not say; slow reasoning models get longer."""
    name = model.lower()
    if provider == "xai" and name.startswith("grok-4"):
        return 60.0
    if provider == "openai" and name.startswith("gpt-5"):
        return 45.0
    return _PROVIDER_TIMEOUTS.get(provider, DEFAULT_REQUEST_TIMEOUT_SECONDS)


_DEFAULT_TEMPERATURE_ONLY = re.compile(r"^(?:gpt-5|o\d)")


def sends_temperature(model: str) -> bool:
    """OpenAI's reasoning models (gpt-5, o1, o3, o4...) accept only their default temperature, so
    none is sent to them, on every route (an OpenAI-compatible base URL gets no LiteLLM to drop it)."""
    return _DEFAULT_TEMPERATURE_ONLY.match(model.lower().rsplit("/", 1)[-1]) is None


@functools.lru_cache(maxsize=256)
def response_format(model_id: str) -> dict[str, Any]:
    """A strict JSON schema where LiteLLM knows the model supports one, plain JSON mode otherwise."""
    litellm = import_litellm()
    lookup_id = model_id.replace("openai/responses/", "openai/", 1)
    try:
        supported = bool(litellm.supports_response_schema(model=lookup_id, custom_llm_provider=None))
    except Exception:  # LiteLLM raises for ids it cannot map; that simply means "unknown"
        supported = False
    if supported:
        return {"type": "json_schema", "json_schema": VERDICT_SCHEMA}
    return {"type": "json_object"}
