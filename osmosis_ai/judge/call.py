"""A judgment's requests to its judge model: one deadline, an optional rate limit, retries.

:func:`complete` sends the request through the model seam (:mod:`osmosis_ai.models.complete`),
retries transient failures with the SDK's one loop (:func:`osmosis_ai._http.retrying`), and maps
what is left onto :class:`ProviderRequestError` and :class:`ModelNotFoundError`, with the
provider's own words as the detail.

Every attempt runs under the judgment's :class:`Deadline`. The HTTP clients' own timeouts bound
each read, not the call: a provider that drips its reply a byte at a time would never trip them.
So the whole attempt is cancelled when the deadline passes, a back-off that would outlast it is
not started, and the failure is a :class:`JudgeTimeoutError`. The model call itself keeps getting
the configured timeout, not the time remaining: LiteLLM caches HTTP clients per timeout value,
and a new value per call would build a new client per call. Waiting for a rate-limit slot is
queueing, not the judge's time, and moves the deadline by as long as it took.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osmosis_ai import _http
from osmosis_ai._deadline import Deadline
from osmosis_ai.judge.errors import JudgeTimeoutError, ModelNotFoundError, ProviderRequestError
from osmosis_ai.judge.ratelimit import RateLimiter
from osmosis_ai.judge.retry import RetryPolicy
from osmosis_ai.models import complete as models
from osmosis_ai.models.errors import ModelCallError

if TYPE_CHECKING:
    from osmosis_ai.models.concurrency import CallObserver

logger = logging.getLogger(__name__)

_DEADLINE_SLACK = 0.05  # seconds: a failure this close to the deadline is the deadline's doing


@dataclass(frozen=True)
class JudgeRequest:
    """Everything needed to call the judge once; the API key never appears in ``repr``."""

    provider: str
    model: str
    model_id: str
    messages: list[dict[str, str]]
    timeout: float
    response_format: dict[str, Any]
    api_key: str | None = field(default=None, repr=False)
    api_base: str | None = None
    reasoning_effort: str | None = None
    temperature: float | None = 0.0
    quoted: frozenset[tuple[str, str]] = field(default=frozenset(), repr=False)
    """Verdict-shaped objects inside the quoted inputs (see :func:`osmosis_ai.judge.parsing.quoted_verdicts`)."""

    @property
    def structured(self) -> bool:
        """Whether the provider was asked for the verdict's JSON schema (not just any JSON)."""
        return self.response_format.get("type") == "json_schema"

    @functools.cached_property
    def route(self) -> models.Route:
        """Where the judge's requests go (decided once per judgment)."""
        return models.route(self.model_id, api_base=self.api_base, api_key=self.api_key)

    def params(self) -> dict[str, Any]:
        """The request's fields besides the messages; LiteLLM drops those the model does not take."""
        params: dict[str, Any] = {"response_format": self.response_format, "drop_params": True}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        return params


def _expired(deadline: Deadline, request: JudgeRequest) -> JudgeTimeoutError:
    return JudgeTimeoutError(
        request.provider,
        request.model,
        f"No verdict within the {deadline.seconds:g} s timeout (connecting, receiving the reply and "
        "any retries included)",
    )


def _as_provider_error(exc: ModelCallError, request: JudgeRequest) -> ProviderRequestError:
    if exc.kind == "not_found":
        return ModelNotFoundError(
            request.provider,
            request.model,
            f"Model '{request.model_id}' was not found; check the model identifier and that your "
            f"account can access it. ({exc.message})",
        )
    return ProviderRequestError(request.provider, request.model, exc.message)


async def _acquire(limiter: RateLimiter | None, deadline: Deadline) -> None:
    if limiter is None:
        return
    started = time.monotonic()
    await limiter.acquire()
    deadline.postpone(time.monotonic() - started)


async def complete(
    request: JudgeRequest,
    messages: list[dict[str, str]],
    *,
    retry: RetryPolicy,
    limiter: RateLimiter | None = None,
    deadline: Deadline | None = None,
    observer: CallObserver | None = None,
) -> models.Completion:
    """Send ``messages`` to the judge and return its reply; retry transient failures.

    ``deadline`` (default: ``request.timeout`` from now) bounds all attempts together.

    Raises:
        ModelNotFoundError: the provider does not know the model.
        JudgeTimeoutError: the deadline passed before a reply arrived.
        ProviderRequestError: any other provider failure, after the allowed retries.
    """
    bound = deadline or Deadline.after(request.timeout)
    target, params = request.route, request.params()

    async def attempt() -> models.Completion:
        await _acquire(limiter, bound)
        remaining = bound.remaining()
        if remaining <= 0:
            raise _expired(bound, request)
        try:
            call = models.complete(target, messages, timeout=request.timeout, observer=observer, **params)
            return await asyncio.wait_for(call, remaining)
        except Exception as exc:
            if bound.remaining() <= _DEADLINE_SLACK:
                raise _expired(bound, request) from exc
            raise

    def log(number: int, exc: Exception, wait: float) -> None:
        kind = exc.kind if isinstance(exc, ModelCallError) else type(exc).__name__
        logger.info(
            "judge %s attempt %d failed (%s); retrying in %.2fs", request.model_id, number, kind, wait
        )

    try:
        return await _http.retrying(
            attempt,
            retry,
            retryable=models.transient,
            retry_after=models.retry_after,
            give_up=lambda wait: wait >= bound.remaining(),
            on_retry=log,
        )
    except ModelCallError as exc:
        raise _as_provider_error(exc, request) from exc
