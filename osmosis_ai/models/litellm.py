"""Named providers through LiteLLM: the SDK's one call of ``litellm.acompletion``.

Each call is one request: LiteLLM's and the OpenAI SDK's own retries are switched off, because the
callers retry with the SDK's one loop (:func:`osmosis_ai._http.retrying`) and attempts would
multiply. Whatever LiteLLM raises comes out as a classified
:class:`~osmosis_ai.models.errors.ModelCallError`, and the reply as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osmosis_ai._litellm import aimport_litellm, import_litellm
from osmosis_ai.models.errors import model_error

# Providers that sign in by other means than an ``*_API_KEY`` variable (cloud credential chains,
# Azure AD tokens): their keys are not checked before the first request.
_OWN_CREDENTIALS = frozenset({"azure", "azure_ai", "bedrock", "sagemaker", "vertex_ai", "vertex_ai_beta"})


def to_plain(response: Any) -> Any:
    """The provider reply as plain Python data (``model_dump``, ``dict`` or ``to_dict``)."""
    for method in ("model_dump", "dict", "to_dict"):
        convert = getattr(response, method, None)
        if callable(convert):
            try:
                return convert()
            except Exception:  # a converter that does not apply to this object: try the next one
                continue
    return response


async def acomplete(
    model_id: str,
    messages: list[dict[str, Any]],
    *,
    api_key: str | None,
    api_base: str | None,
    timeout: float,
    params: Mapping[str, Any],
) -> Any:
    """One ``litellm.acompletion`` request; returns the reply as plain data.

    Raises:
        ModelCallError: the call failed (classified; the LiteLLM exception is its ``__cause__``).
    """
    litellm = await aimport_litellm()  # the first import takes seconds: not on the event loop
    kwargs = {**params, "num_retries": 0, "max_retries": 0}
    if api_key is not None:
        kwargs["api_key"] = api_key
    if api_base is not None:
        kwargs["api_base"] = api_base
    try:
        response = await litellm.acompletion(model=model_id, messages=messages, timeout=timeout, **kwargs)
    except Exception as exc:
        raise model_error(exc) from exc
    return to_plain(response)


def is_provider(prefix: str) -> bool:
    """Whether LiteLLM knows ``prefix`` as a provider (``ollama``, ``anthropic``...); imports LiteLLM."""
    return prefix in import_litellm().provider_list


def missing_keys(model_id: str) -> list[str]:
    """The API-key variables ``model_id``'s provider needs and the environment lacks (any one will do).

    Empty when the provider signs in by other means or LiteLLM cannot tell.
    """
    litellm = import_litellm()
    try:
        provider = litellm.get_llm_provider(model_id)[1]
        report = litellm.validate_environment(model=model_id)
    except Exception:  # a model LiteLLM cannot route: the preflight request reports that itself
        return []
    if provider in _OWN_CREDENTIALS or report.get("keys_in_environment"):
        return []
    return [name for name in report.get("missing_keys") or [] if str(name).endswith("_API_KEY")]
