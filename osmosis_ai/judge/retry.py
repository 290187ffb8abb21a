"""When and how long to wait before asking a provider again.

Transient failures (HTTP 429 and 5xx, timeouts, dropped connections) are retried with exponential
back-off and jitter, never sooner than the provider's ``Retry-After``; everything else (bad key,
unknown model, bad request) fails at once. ``sleep`` is injectable so tests can run without waiting.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai._retry_after import parse_retry_after

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class RetryPolicy:
    """Retry limits for one judgment.

    Attributes:
        max_attempts: provider calls allowed per judgment for transient errors (1 = no retry).
        malformed_retries: corrective re-asks when the reply holds no usable verdict.
        base_delay: first back-off in seconds; doubles per attempt, with jitter.
        max_delay: cap on a single back-off.
        max_retry_after: cap on how long a provider's ``Retry-After`` can make us wait.
        sleep: the coroutine used to wait (tests pass a no-op).
    """

    max_attempts: int = 4
    malformed_retries: int = 1
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[Any]] = field(default=asyncio.sleep, repr=False, compare=False)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        wait = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (a LiteLLM/OpenAI error) is worth retrying."""
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return True
    name = type(exc).__name__
    if name in {"Timeout", "APITimeoutError", "APIConnectionError", "ServiceUnavailableError"}:
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status in _RETRYABLE_STATUS


def retry_after_seconds(exc: BaseException) -> float | None:
    """The provider's ``Retry-After`` (or ``retry-after-ms``) hint carried by ``exc``, in seconds."""
    headers: Any = getattr(getattr(exc, "response", None), "headers", None) or getattr(
        exc, "litellm_response_headers", None
    )
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    return parse_retry_after(str(value)) if value else None
