"""What a failed model call means: one classification for every caller and every route.

A failure has a **kind**, and the kind says what can be done about it:

* **transient** — ``rate_limit``, ``server``, ``timeout``, ``connection``: asking again, after a
  back-off (never sooner than the provider's ``Retry-After``), may succeed;
* **systemic** — ``auth``, ``missing_key``, ``budget``, ``not_found``, ``config``, and
  ``connection`` once the retries are used up: no other call can succeed until someone fixes it
  (a key, a model name, a base URL), so a run stops;
* **per-row** — ``context_window``, ``bad_request``, ``other``: this request fails, others may not;
* **client** — LiteLLM failed in its own code (a bug, or an answer it cannot read), which it
  reports under its connection class: asking again gives the same, so the preflight stops on it
  (:data:`PREFLIGHT`), while during a run it fails only its row (it may follow from one answer).

:func:`model_error` turns whatever a call raised (LiteLLM's many exception classes, a timeout, the
direct route's HTTP answers) into a :class:`ModelCallError` carrying the kind, the HTTP status
when there was one, the server's ``Retry-After`` hint and the provider's own words, cleaned.
Messages are read before classes and statuses, because LiteLLM reports some failures under
another class: a missing OpenAI key arrives as a 500 ``InternalServerError``, a missing Gemini
key as an ``APIConnectionError``.
"""

from __future__ import annotations

import re
from typing import Any

from osmosis_ai import _http
from osmosis_ai.errors import EvaluationError, OsmosisError

MESSAGE_LIMIT = 200

TRANSIENT = frozenset({"rate_limit", "server", "timeout", "connection"})
SYSTEMIC = frozenset({"auth", "missing_key", "budget", "not_found", "config", "connection"})
PREFLIGHT = SYSTEMIC | {"client"}
"""The kinds that stop a run at its preflight."""
# Raised by a library's own code, never by a network or a provider: LiteLLM wrapping one of these
# as an APIConnectionError failed before or after the provider answered.
_PROGRAMMING = (AttributeError, TypeError, KeyError, IndexError, NameError, AssertionError)

# LiteLLM exception class -> kind, looked up along the exception's MRO, most specific first.
_BY_CLASS = {
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "BudgetExceededError": "budget",
    "NotFoundError": "not_found",
    "ContextWindowExceededError": "context_window",
    "RateLimitError": "rate_limit",
    "Timeout": "timeout",
    "APITimeoutError": "timeout",
    "APIConnectionError": "connection",
}
_BY_STATUS = {401: "auth", 403: "auth", 404: "not_found", 408: "timeout", 429: "rate_limit"}
_AUTH = re.compile(
    r"missing (?:\w+ )?(?:api[ _-]?key|credentials)|(?:invalid|incorrect|no) (?:\w+ )?api[ _-]?key"
    r"|api[ _-]?key (?:is )?(?:missing|invalid|not (?:set|provided|found))|api_key client option must be set"
)
_BUDGET = re.compile(r"exceeded your current quota|insufficient_quota|budget (?:has been )?exceeded")
_CONTEXT = re.compile(
    r"maximum context length|context_length_exceeded|context window|prompt is too long"
    r"|longer than the model's context length|exceeds the available context size|maximum input length"
)
_UNROUTABLE = ("llm provider not provided", "provider not provided")
_CONNECTION = (
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


class ModelCallError(OsmosisError):
    """A model call failed; ``kind`` says how (see the module docstring).

    ``status`` is the HTTP status of the answer when there was one, ``retry_after`` the seconds
    the server asked us to wait, and the message the provider's own words, cleaned and cut short.
    """

    def __init__(
        self, message: str, *, kind: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Whether asking again, after a back-off, may succeed."""
        return self.kind in TRANSIENT

    @property
    def systemic(self) -> bool:
        """Whether no other call can succeed either (for ``connection``: once retries are used up)."""
        return self.kind in SYSTEMIC


class ModelRouteError(OsmosisError, ValueError):
    """A model name and base URL that name no model the SDK can call (also a ``ValueError``)."""


_HINTS = {
    "missing_key": "no API key for its provider",
    "auth": "the provider refused the API key; check the key (or the provider's key variable)",
    "budget": "the provider's budget for this key is exhausted",
    "not_found": "the provider does not know this model (or this endpoint has no such route); check the name",
    "connection": "the provider's endpoint does not answer; check the base URL and the network",
    "config": "LiteLLM cannot route this model name; use provider/model, e.g. openai/gpt-4o-mini",
    "client": "LiteLLM fails in its own code on this provider's answer, not at the provider; try another "
    "litellm version, or openai/MODEL with the base URL if the endpoint speaks the OpenAI API",
}


def describe(model: str, kind: str, message: str, status: int | None = None) -> str:
    """One line for a systemic failure of ``model``: what is wrong, what to do, and the provider's words.

    Every command words its failures this way, a missing key included (``kind="missing_key"``, the
    message from :func:`osmosis_ai.models.keys.key_hint`).
    """
    hint = _HINTS.get(kind, "the provider refused the request")
    # LiteLLM gives a connection failure a made-up 500; only a real answer's status is worth showing.
    shown_status = f"HTTP {status}: " if status and kind != "connection" else ""
    return f"model {model!r} cannot be used: {hint} ({shown_status}{message})"


def provider_message(exc: BaseException) -> str:
    """The provider's own explanation in ``exc``: LiteLLM's class prefix and trailing noise removed, cut short."""
    return (
        clean_message(str(getattr(exc, "message", None) or exc or type(exc).__name__)) or type(exc).__name__
    )


def clean_message(text: str) -> str:
    """``text`` on one line, without LiteLLM's class prefixes and trailing noise, cut to :data:`MESSAGE_LIMIT`."""
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
    return text


def kind_of(text: str, status: int | None = None, exc: BaseException | None = None) -> str:
    """The kind of a failure from its message ``text``, its HTTP ``status`` and the exception raised."""
    lowered = text.lower()
    if _AUTH.search(lowered):
        return "auth"
    if _BUDGET.search(lowered):
        return "budget"
    if _CONTEXT.search(lowered):
        return "context_window"
    for cls in type(exc).__mro__ if exc is not None else ():
        known = _BY_CLASS.get(cls.__name__)
        if known is not None:
            return "client" if known == "connection" and _raised_by_code(exc) else known
    if any(phrase in lowered for phrase in _UNROUTABLE):
        return "config"
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if isinstance(exc, (ConnectionError, OSError)) or any(phrase in lowered for phrase in _CONNECTION):
        return "connection"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if status is not None:
        return "server" if _http.is_retryable_status(status) else "bad_request"
    return "other"


def _raised_by_code(exc: BaseException | None) -> bool:
    """Whether what ``exc`` wraps is a programming error, with no network error along the way."""
    seen: set[int] = set()
    programming = False
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError):
            return False
        programming = programming or isinstance(exc, _PROGRAMMING)
        exc = exc.__cause__ or exc.__context__
    return programming


def _retry_after(exc: BaseException) -> float | None:
    headers: Any = getattr(getattr(exc, "response", None), "headers", None) or getattr(
        exc, "litellm_response_headers", None
    )
    return _http.retry_after_from(headers)


def model_error(exc: BaseException) -> ModelCallError:
    """``exc`` (raised by a model call) as a classified :class:`ModelCallError`; one already is returned as is."""
    if isinstance(exc, ModelCallError):
        return exc
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    kind = kind_of(str(exc), status, exc)
    if kind == "client":
        status = None  # LiteLLM's made-up 500: no answer's status is known
    return ModelCallError(provider_message(exc), kind=kind, status=status, retry_after=_retry_after(exc))


class ProviderCheckError(EvaluationError):
    """The model provider refused the preflight request in a way no row can succeed after.

    A bad key, an unknown model or an endpoint that does not answer. ``kind`` is the failure's
    class (``"auth"``, ``"not_found"``, ``"connection"``, ``"config"``) and ``status`` the HTTP
    status when there was one.
    """

    def __init__(self, message: str, *, kind: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class ProviderError(EvaluationError):
    """A model call failed for this row only (bad request, context too long, retries used up).

    ``kind`` is the failure's class (see :func:`~osmosis_ai.models.providers.classify_provider_error`)
    and ``status`` its HTTP status, when there was one. The positional arguments are any
    exception's, as in 0.2 (``ProviderError("what", detail)``).
    """

    def __init__(self, *args: object, kind: str = "other", status: int | None = None) -> None:
        super().__init__(*args)
        self.kind = kind
        self.status = status


class SystemicProviderError(ProviderError):
    """A model call failed in a way no row can get past: the run should stop.

    ``duration_ms`` and ``tokens`` are left for the runner to fill in with what the row had used.
    """

    def __init__(self, *args: object, kind: str = "other", status: int | None = None) -> None:
        super().__init__(*args, kind=kind, status=status)
        self.duration_ms: float | None = None
        self.tokens: int | None = None
