"""The one place that sends a judge request through LiteLLM.

:func:`complete` makes the call with retries (see :mod:`osmosis_ai.judge.retry`), an optional
shared rate limit, and maps LiteLLM's many exception classes onto :class:`ProviderRequestError`
and :class:`ModelNotFoundError` with a readable detail. It returns the reply as a plain dict.
LiteLLM's and the OpenAI SDK's own retries are switched off so attempts are not multiplied.

Every attempt runs under the judgment's :class:`Deadline`. The HTTP clients' own timeouts bound
each read, not the call: a provider that drips its reply a byte at a time would never trip them.
So the whole attempt is cancelled when the deadline passes, a back-off that would outlast it is
not started, and the failure is a :class:`JudgeTimeoutError`. LiteLLM itself keeps getting the
configured timeout, not the time remaining: it caches HTTP clients per timeout value, and a new
value per call would build a new client per call. Waiting for a rate-limit slot is
queueing, not the judge's time, and moves the deadline by as long as it took.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai._litellm import import_litellm
from osmosis_ai.judge.errors import JudgeTimeoutError, ModelNotFoundError, ProviderRequestError
from osmosis_ai.judge.ratelimit import RateLimiter
from osmosis_ai.judge.retry import RetryPolicy, is_transient, retry_after_seconds

logger = logging.getLogger(__name__)

_DEADLINE_SLACK = 0.05  # seconds: a failure this close to the deadline is the deadline's doing

_PROVIDER_ERRORS = ("APIError", "RateLimitError", "AuthenticationError", "Timeout", "APIConnectionError")


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

    def litellm_kwargs(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model_id,
            "messages": messages,
            "response_format": self.response_format,
            "timeout": self.timeout,
            "drop_params": True,
            "max_retries": 0,
            "num_retries": 0,
        }
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.reasoning_effort
        return kwargs


class Deadline:
    """The one time limit of a judgment: every request, back-off and corrective re-ask shares it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self._end - time.monotonic()

    def postpone(self, seconds: float) -> None:
        """Move the deadline by ``seconds`` not spent on the judge (waiting for a rate-limit slot)."""
        self._end += seconds

    def expired_error(self, request: JudgeRequest) -> JudgeTimeoutError:
        return JudgeTimeoutError(
            request.provider,
            request.model,
            f"No verdict within the {self.seconds:g} s timeout (connecting, receiving the reply and "
            "any retries included)",
        )


def error_detail(exc: BaseException) -> str:
    """The most informative message carried by a provider exception."""
    for attribute in ("message", "detail", "error"):
        value = getattr(exc, attribute, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            for key in ("message", "code"):
                if isinstance(error.get(key), str) and error[key].strip():
                    return str(error[key]).strip()
        elif isinstance(error, str) and error.strip():
            return error.strip()
    return str(exc).strip() or f"{type(exc).__name__} encountered while contacting provider."


def _as_provider_error(exc: Exception, request: JudgeRequest) -> Exception:
    litellm = import_litellm()
    if isinstance(exc, litellm.NotFoundError):
        return ModelNotFoundError(
            request.provider,
            request.model,
            f"Model '{request.model_id}' was not found; check the model identifier and that your "
            f"account can access it. ({error_detail(exc)})",
        )
    if isinstance(exc, tuple(getattr(litellm, name) for name in _PROVIDER_ERRORS)):
        return ProviderRequestError(request.provider, request.model, error_detail(exc))
    return exc


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
) -> Any:
    """Send ``messages`` to the judge and return the reply as plain data; retry transient failures.

    ``deadline`` (default: ``request.timeout`` from now) bounds all attempts together.

    Raises:
        ModelNotFoundError: the provider does not know the model.
        JudgeTimeoutError: the deadline passed before a reply arrived.
        ProviderRequestError: any other provider failure, after the allowed retries.
    """
    litellm = import_litellm()
    deadline = deadline or Deadline(request.timeout)
    kwargs = request.litellm_kwargs(messages)
    attempt = 0
    while True:
        attempt += 1
        await _acquire(limiter, deadline)
        remaining = deadline.remaining()
        if remaining <= 0:
            raise deadline.expired_error(request)
        try:
            return to_plain(await asyncio.wait_for(litellm.acompletion(**kwargs), remaining))
        except Exception as exc:
            if deadline.remaining() <= _DEADLINE_SLACK:
                raise deadline.expired_error(request) from exc
            wait = retry.delay(attempt, retry_after_seconds(exc))
            if attempt >= retry.max_attempts or not is_transient(exc) or wait >= deadline.remaining():
                raise _as_provider_error(exc, request) from exc
            logger.info(
                "judge %s attempt %d failed (%s); retrying in %.2fs",
                request.model_id,
                attempt,
                type(exc).__name__,
                wait,
            )
            await retry.sleep(wait)
