"""What a failed model-provider call means for a run, and the preflight check before any row runs.

A provider failure is either **systemic** — no row can succeed until someone fixes it: a bad or
missing key, an exhausted budget, an unknown model, an endpoint that does not answer, a model name
LiteLLM cannot route — or a **row** failure that another attempt or another row may not hit: a
rate limit, a timeout, a context window exceeded, a server error. The classification is the model
seam's (:mod:`osmosis_ai.models.errors`); :func:`classify_provider_error` shows it as a
:class:`ProviderFailure` and :func:`describe_failure` words a systemic one for the user.

:func:`preflight` sends one tiny request (``max_tokens=1``) before a run starts, so a run that cannot
work stops at once with one line instead of failing every row after its retries. Only systemic
failures (and LiteLLM failing in its own code) stop it: a rate limit proves the key and the model
are good, and a transient error is left for the rows' own retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osmosis_ai.models import complete as models
from osmosis_ai.models.errors import (
    MESSAGE_LIMIT,
    ModelCallError,
    ProviderCheckError,
    describe,
    model_error,
    provider_message,
)

__all__ = [
    "MESSAGE_LIMIT",
    "ProviderFailure",
    "classify_provider_error",
    "describe_failure",
    "preflight",
    "provider_message",
]

# The arguments of a LiteLLM call that the route carries, or that a one-token check leaves out.
_NOT_PARAMS = frozenset({"messages", "api_key", "api_base", "custom_llm_provider", "timeout"})


@dataclass(frozen=True)
class ProviderFailure:
    """A classified provider failure: ``kind``, whether it is ``systemic``, the HTTP ``status`` and the provider's words."""

    kind: str
    systemic: bool
    status: int | None
    message: str


def classify_provider_error(exc: BaseException) -> ProviderFailure:
    """Classify an exception raised by a model call (LiteLLM's, the seam's, or any provider client's)."""
    error = model_error(exc)
    return ProviderFailure(error.kind, error.systemic, error.status, error.message)


def describe_failure(model: str, failure: ProviderFailure) -> str:
    """One line for a systemic failure: what is wrong with ``model``, what to do, and the provider's words."""
    return describe(model, failure.kind, failure.message, failure.status)


def check_error(model: str, exc: ModelCallError) -> ProviderCheckError:
    """The :class:`ProviderCheckError` that reports a failed preflight of ``model``."""
    return ProviderCheckError(
        describe_failure(model, classify_provider_error(exc)), kind=exc.kind, status=exc.status
    )


async def preflight(model: str, request: Mapping[str, Any], *, timeout: float = 30.0) -> None:
    """Ask ``model`` for one token; raise :class:`ProviderCheckError` if no row could succeed.

    ``request`` holds the other ``litellm.acompletion`` arguments the run itself will use
    (``api_base``, ``api_key``, ``extra_body``...), so the check takes the same route.
    Other failures are logged at debug level and otherwise ignored.
    """
    target = await models.aroute(model, api_base=request.get("api_base"), api_key=request.get("api_key"))
    params = {k: v for k, v in request.items() if k not in _NOT_PARAMS}
    try:
        await models.preflight(target, timeout=timeout, **params)
    except ModelCallError as exc:
        raise check_error(model, exc) from exc
