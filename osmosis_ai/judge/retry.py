"""When and how long to wait before asking a judge provider again.

The policy and the loop are the SDK's one set (:mod:`osmosis_ai._http`), and which failures are
transient is the model seam's (:mod:`osmosis_ai.models.errors`): rate limits, server errors,
timeouts and dropped connections are retried with exponential back-off and jitter, never sooner
than the provider's ``Retry-After``; everything else (bad key, unknown model, bad request) fails at
once. The judge adds one limit of its own, ``malformed_retries``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
