"""When and how long to wait before asking a judge provider again.

The policy, the retryable statuses and the ``Retry-After`` rule are the SDK's one set
(:mod:`osmosis_ai._http`): transient failures (the retryable statuses, timeouts, dropped connections)
are retried with exponential back-off and jitter, never sooner than the provider's ``Retry-After``;
everything else (bad key, unknown model, bad request) fails at once. The judge adds one limit of its
own, ``malformed_retries``. Provider calls go through LiteLLM, so only the policy comes from the seam,
not the HTTP client.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from osmosis_ai import _http


@dataclass(frozen=True)
class RetryPolicy(_http.RetryPolicy):
    """Retry limits for one judgment: :class:`osmosis_ai._http.RetryPolicy` plus ``malformed_retries``.

    Attributes:
        max_attempts: provider calls allowed per judgment for transient errors (1 = no retry).
        malformed_retries: corrective re-asks when the reply holds no usable verdict.
        base_delay: first back-off in seconds; doubles per attempt, with jitter.
        max_delay: cap on a single back-off.
        max_retry_after: cap on how long a provider's ``Retry-After`` can make us wait.
        jitter: draw each back-off from its upper half.
        sleep: the coroutine used to wait (tests pass a no-op).
    """

    malformed_retries: int = 1


_TRANSIENT_NAMES = frozenset({"Timeout", "APITimeoutError", "APIConnectionError", "ServiceUnavailableError"})


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (a LiteLLM/OpenAI error) is worth retrying."""
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return True
    if type(exc).__name__ in _TRANSIENT_NAMES:
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and _http.is_retryable_status(status)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The provider's ``Retry-After`` (or ``retry-after-ms``) hint carried by ``exc``, in seconds."""
    headers: Any = getattr(getattr(exc, "response", None), "headers", None) or getattr(
        exc, "litellm_response_headers", None
    )
    return _http.retry_after_from(headers)
