"""What a failed model-provider call means for a run, and the preflight check before any row runs.

A provider failure is either **systemic** — no row can succeed until someone fixes it: a bad or
missing key, an exhausted budget, an unknown model, an endpoint that does not answer, a model name
LiteLLM cannot route — or a **row** failure that another attempt or another row may not hit: a
rate limit, a timeout, a context window exceeded, a server error. :func:`classify_provider_error`
says which, from LiteLLM's exception classes first and the HTTP status and message second.

:func:`preflight` sends one tiny request (``max_tokens=1``) before a run starts, so a run that cannot
work stops at once with one line instead of failing every row after its retries. Only systemic
failures stop it: a rate limit proves the key and the model are good, and a transient error is left
for the rows' own retries.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osmosis_ai._litellm import aimport_litellm
from osmosis_ai.evaluation.errors import ProviderCheckError

logger = logging.getLogger(__name__)

MESSAGE_LIMIT = 200

# LiteLLM exception class -> (kind, systemic). Looked up along the exception's MRO, most specific first.
_BY_CLASS = {
    "AuthenticationError": ("auth", True),
    "PermissionDeniedError": ("auth", True),
    "BudgetExceededError": ("budget", True),
    "NotFoundError": ("not_found", True),
    "APIConnectionError": ("connection", True),
    "RateLimitError": ("rate_limit", False),
    "Timeout": ("timeout", False),
    "APITimeoutError": ("timeout", False),
    "ContextWindowExceededError": ("context_window", False),
}
_CONNECTION_PHRASES = (
    "connection error",
    "connection refused",
    "name or service not known",
    "nodename nor servname provided",
    "connect call failed",
    "cannot connect to host",
)
_NOISE = ("\nReceived Model Group=", "Traceback", "Request to ", "give]")
# "litellm.AuthenticationError: AuthenticationError: OpenAIException - <the provider's words>"
_PREFIX = re.compile(r"^(?:litellm\.)?\w+(?:Error|Exception)(?::\s*|\s+-\s+)")

_HINTS = {
    "auth": "the provider refused the API key; check the key (or the provider's key variable)",
    "budget": "the provider's budget for this key is exhausted",
    "not_found": "the provider does not know this model (or this endpoint has no such route); check the name",
    "connection": "the provider's endpoint does not answer; check the base URL and the network",
    "config": "LiteLLM cannot route this model name; use provider/model, e.g. openai/gpt-4o-mini",
}


@dataclass(frozen=True)
class ProviderFailure:
    """A classified provider failure: ``kind``, whether it is ``systemic``, the HTTP ``status`` and the provider's words."""

    kind: str
    systemic: bool
    status: int | None
    message: str


def provider_message(exc: BaseException) -> str:
    """The provider's own explanation in ``exc``: LiteLLM's class prefix and trailing noise removed, cut short."""
    text = str(getattr(exc, "message", None) or exc or type(exc).__name__)
    text = text.strip()
    while True:
        shorter = _PREFIX.sub("", text, count=1)
        if shorter == text:
            break
        text = shorter
    for marker in _NOISE:
        cut = text.find(marker)
        if cut > 0:
            text = text[:cut]
    text = " ".join(text.split())
    if len(text) > MESSAGE_LIMIT:
        text = text[:MESSAGE_LIMIT].rstrip() + "..."
    return text or type(exc).__name__


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def classify_provider_error(exc: BaseException) -> ProviderFailure:
    """Classify an exception raised by a LiteLLM call (or any provider client)."""
    status = _status(exc)
    message = provider_message(exc)
    for cls in type(exc).__mro__:
        known = _BY_CLASS.get(cls.__name__)
        if known is not None:
            return ProviderFailure(known[0], known[1], status, message)
    lowered = str(exc).lower()
    if "llm provider not provided" in lowered or "provider not provided" in lowered:
        return ProviderFailure("config", True, status, message)
    if status in (401, 403):
        return ProviderFailure("auth", True, status, message)
    if status == 404:
        return ProviderFailure("not_found", True, status, message)
    if isinstance(exc, (ConnectionError, OSError)) or any(p in lowered for p in _CONNECTION_PHRASES):
        return ProviderFailure("connection", True, status, message)
    if isinstance(exc, TimeoutError):
        return ProviderFailure("timeout", False, status, message)
    if status is not None:
        return ProviderFailure("server" if status >= 500 else "bad_request", False, status, message)
    return ProviderFailure("other", False, status, message)


def describe_failure(model: str, failure: ProviderFailure) -> str:
    """One line for a systemic failure: what is wrong with ``model``, what to do, and the provider's words."""
    hint = _HINTS.get(failure.kind, "the provider refused the request")
    # LiteLLM gives a connection failure a made-up 500; only a real answer's status is worth showing.
    status = f"HTTP {failure.status}: " if failure.status and failure.kind != "connection" else ""
    return f"model {model!r} cannot be used: {hint} ({status}{failure.message})"


async def preflight(model: str, request: Mapping[str, Any], *, timeout: float = 30.0) -> None:
    """Ask ``model`` for one token with LiteLLM; raise :class:`ProviderCheckError` if no row could succeed.

    ``request`` holds the other ``litellm.acompletion`` arguments the run itself will use
    (``api_base``, ``api_key``, ``custom_llm_provider``, ...), so the check exercises the same route.
    Non-systemic failures are logged at debug level and otherwise ignored.
    """
    litellm = await aimport_litellm()
    kwargs = {k: v for k, v in request.items() if k not in ("messages", "max_tokens", "tools")}
    kwargs.update(max_retries=0, num_retries=0, timeout=timeout)
    try:
        await litellm.acompletion(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=1, **kwargs
        )
    except Exception as exc:
        failure = classify_provider_error(exc)
        if failure.systemic:
            raise ProviderCheckError(
                describe_failure(model, failure), kind=failure.kind, status=failure.status
            ) from exc
        logger.debug("preflight of %s ended in a %s failure; the run goes on: %s", model, failure.kind, exc)
