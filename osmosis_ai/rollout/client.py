"""``OsmosisLLMClient``: the RolloutServer's side of the callbacks to TrainGate.

Two calls per rollout kind: ``chat_completions`` (``POST {server_url}/v1/chat/completions``, many per
rollout) and ``complete_rollout`` (``POST {server_url}/v1/rollout/completed``, once). Both go through
``_exchange``, the single place that talks HTTP, with one status policy:

* any 2xx is success;
* the retryable statuses of :mod:`osmosis_ai._http` (408, 425, 429, 5xx), timeouts and connection
  failures are retried, up to ``max_retries`` (chat) or ``complete_rollout_retries`` (completed) extra
  attempts, with that module's :class:`~osmosis_ai._http.RetryPolicy`: an exponential back-off
  ``min(retry_base_delay * 2**k, retry_max_delay)`` with jitter, or the answer's ``Retry-After`` when
  that is longer (capped by ``retry_max_delay``);
* any other 4xx raises ``OsmosisValidationError`` at once; 1xx/3xx raise it as an unexpected status;
* a 2xx chat answer that is not a usable completion (not JSON, no ``choices[0].message``) raises
  ``OsmosisServerError`` without retrying, because TrainGate may already have recorded the generation.

Each logical chat call carries an ``Idempotency-Key`` header that stays the same across its retries,
so TrainGate can recognise a retried generation. The request body is exactly the ``CompletionsRequest``
shape; keyword arguments it has no field for are dropped, with one warning per argument name.

Construction is cheap (no I/O): connections come from the event loop's shared pool in ``_http``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import secrets
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from osmosis_ai._deadline import Deadline
from osmosis_ai._http import (
    FailureLog,
    NoAnswer,
    RetryPolicy,
    Transport,
    endpoint_of,
    get_shared_transport,
    is_retryable_status,
    parse_retry_after,
    redact,
    retrying,
)
from osmosis_ai._http import Response as TransportResponse
from osmosis_ai.errors import RewardReturnError
from osmosis_ai.observe import tracing
from osmosis_ai.rewards.score import agent_reward
from osmosis_ai.rollout.config.settings import RolloutClientSettings, get_settings
from osmosis_ai.rollout.core.exceptions import (
    OsmosisRolloutError,
    OsmosisServerError,
    OsmosisTimeoutError,
    OsmosisTransportError,
    OsmosisValidationError,
    RolloutValueError,
)
from osmosis_ai.rollout.core.schemas import (
    REWARD_ERROR_FIELD,
    CompletionsRequest,
    MessageDict,
    RolloutMetrics,
    RolloutResponse,
    RolloutStatus,
    check_header_safe_key,
)
from osmosis_ai.rollout.utils import normalize_stop

logger = logging.getLogger(__name__)

CHAT_PATH = "/v1/chat/completions"
COMPLETED_PATH = "/v1/rollout/completed"
_ERROR_TEXT_LIMIT = 1000
_TOOL_KWARGS = frozenset({"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"})
_MAX_WARNED_KWARGS = 256

_warned_lock = threading.Lock()
_warned_kwargs: set[str] = set()


@dataclass(frozen=True)
class CompletionsResult:
    """One chat completion as the agent sees it.

    ``token_ids`` / ``logprobs`` are TrainGate's per-token data (``[]`` when absent or null), ``usage``
    its token counts (``{}`` when absent).
    """

    message: dict[str, Any]
    token_ids: list[int]
    logprobs: list[float]
    usage: dict[str, int]
    finish_reason: str

    @property
    def has_tool_calls(self) -> bool:
        """Whether the assistant message asks for tool calls."""
        return bool(self.message.get("tool_calls"))

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The assistant message's tool calls (``[]`` when missing or null)."""
        return self.message.get("tool_calls") or []

    @property
    def content(self) -> str | None:
        """The assistant message's content."""
        return self.message.get("content")


def _warn_dropped_kwargs(kwargs: dict[str, Any]) -> None:
    for key in kwargs:
        if key in _warned_kwargs:
            continue
        with _warned_lock:
            if key in _warned_kwargs or len(_warned_kwargs) >= _MAX_WARNED_KWARGS:
                continue
            _warned_kwargs.add(key)
        hint = (
            " Tools reach TrainGate through the init response (the agent's get_tools()), not chat calls."
            if key in _TOOL_KWARGS
            else ""
        )
        logger.warning(
            "chat_completions() drops the keyword argument %r: the request to TrainGate carries only "
            "model, messages, rollout_id, temperature, top_p, max_tokens, stop and logprobs.%s "
            "(Warned once per argument name.)",
            key,
            hint,
        )


def _check_completion_fields(final_messages: Any, finish_reason: Any, error_message: Any) -> None:
    """The ``RolloutResponse`` shape of the fields, checked first for clearer messages than the model's."""
    if type(final_messages) is not list or not all(isinstance(message, dict) for message in final_messages):
        raise RolloutValueError(
            f"final_messages must be a list of message dicts, got {final_messages!r:.200}"
        )
    for name, value in (("finish_reason", finish_reason), ("error_message", error_message)):
        if value is not None and not isinstance(value, str):
            raise RolloutValueError(f"{name} must be a string or None, got {value!r:.200}")


def _metrics(metrics: Any) -> RolloutMetrics:
    if isinstance(metrics, RolloutMetrics):
        return metrics
    try:
        return RolloutMetrics.model_validate(metrics)
    except ValidationError as exc:
        raise RolloutValueError(f"metrics must be RolloutMetrics or a dict of its fields: {exc}") from exc


def _encode(body: BaseModel, what: str) -> bytes:
    """The model's JSON without nulls: pydantic's serializer, faster than building a dict and ``json.dumps``."""
    try:
        return body.model_dump_json(exclude_none=True).encode()
    except ValueError as exc:  # PydanticSerializationError: a value JSON cannot carry
        raise RolloutValueError(f"cannot send {what}: the data is not valid JSON ({exc})") from exc


def _error_text(response: TransportResponse, secret: str | None = None) -> str:
    text = redact(response.body.decode("utf-8", "replace").strip(), secret)
    if len(text) > _ERROR_TEXT_LIMIT:
        text = text[:_ERROR_TEXT_LIMIT] + "..."
    return text or f"HTTP {response.status} with an empty body"


def _as_count(value: Any) -> int:
    return value if type(value) is int else 0


def _status(status: Any) -> RolloutStatus:
    if isinstance(status, RolloutStatus):
        return status
    try:
        return RolloutStatus(status)
    except ValueError as exc:
        raise RolloutValueError(
            f"{status!r} is not a valid RolloutStatus; use 'COMPLETED' or 'ERROR'"
        ) from exc


class _Retryable(Exception):
    """A failed attempt worth repeating: the error to raise if it stays the last, and the server's hint."""

    def __init__(self, error: OsmosisRolloutError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class OsmosisLLMClient:
    """Client for TrainGate's callbacks of one rollout (``server_url`` + ``rollout_id`` + ``api_key``).

    Args:
        server_url: TrainGate base URL (``RolloutRequest.server_url``); trailing slashes are dropped.
        rollout_id: routes every chat call to TrainGate's session of this rollout.
        api_key: sent as ``Authorization: Bearer <api_key>`` when non-empty.
        timeout_seconds, max_retries, complete_rollout_retries: override ``settings``.
        settings: client settings (default: ``get_settings().client``).
        transport: send through this transport instead of the process-wide pool (tests, custom I/O).
        on_chat: called with the duration in seconds of each answered chat call (the server's metrics).
        on_attempt: called after each attempt of a chat call with the answer's status (``None``: no
            answer: a timeout or a refused connection).
        failures: log failed attempts through this :class:`~osmosis_ai._http.FailureLog` (a server's
            rollouts share one, so a trainer that does not answer costs a few lines a minute, not
            one per rollout and attempt); without it each one is logged.
        chat_url: send chat calls to this OpenAI-compatible URL instead (a 0.3 rollout's
            ``{chat_completions_url}/chat/completions``): the body is then OpenAI's, without
            ``rollout_id``, and carries ``tools``, the agent's tools, on every call.
    """

    def __init__(
        self,
        server_url: str,
        rollout_id: str,
        api_key: str | None = None,
        timeout_seconds: float | None = None,
        max_retries: int | None = None,
        complete_rollout_retries: int | None = None,
        settings: RolloutClientSettings | None = None,
        *,
        transport: Transport | None = None,
        on_chat: Callable[[float], object] | None = None,
        on_attempt: Callable[[int | None], object] | None = None,
        failures: FailureLog | None = None,
        chat_url: str | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        self.settings = settings if settings is not None else get_settings().client
        self.server_url = server_url.rstrip("/")
        self.rollout_id = rollout_id
        self.api_key = api_key
        self.timeout_seconds = timeout_seconds if timeout_seconds else self.settings.timeout_seconds
        self.max_retries = max_retries if max_retries is not None else self.settings.max_retries
        self.complete_rollout_retries = (
            complete_rollout_retries
            if complete_rollout_retries is not None
            else self.settings.complete_rollout_retries
        )
        try:
            check_header_safe_key(api_key)
        except ValueError as exc:
            raise RolloutValueError(str(exc)) from None
        self._transport = transport
        self._on_chat = on_chat
        self._on_attempt = on_attempt
        self._failures = failures
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._chat_url = chat_url or self.server_url + CHAT_PATH
        self._openai_body = chat_url is not None
        self._tools = tools or None
        self._call_prefix = secrets.token_hex(6)
        self._calls = 0
        self._llm_latency_ms = 0.0
        self._num_llm_calls = 0
        self._prompt_tokens = 0
        self._response_tokens = 0

    async def __aenter__(self) -> OsmosisLLMClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Nothing to release: connections belong to the shared pool (``aclose_shared_transport``)."""

    # -- chat --------------------------------------------------------------------------------

    async def chat_completions(
        self,
        messages: list[MessageDict],
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 512,
        stop: Any = None,
        logprobs: bool = True,
        **kwargs: Any,
    ) -> CompletionsResult:
        """Ask TrainGate for the next assistant message of the full conversation ``messages``.

        ``model`` is the only extra keyword honoured; others (``tools``, ``seed``, ``n``...) are dropped
        with a warning. Raises ``OsmosisRolloutError`` subclasses (see the module docstring).
        """
        model = kwargs.pop("model", "default") if kwargs else "default"
        if kwargs:
            if "rollout_id" in kwargs:  # the client is bound to its rollout
                raise TypeError("chat_completions() got multiple values for argument 'rollout_id'")
            _warn_dropped_kwargs(kwargs)
        # Encoded at once and not kept: a call waiting for a pool slot holds only the bytes.
        body = self._chat_body(
            messages, model, temperature, top_p, max_tokens, normalize_stop(stop), logprobs
        )
        self._calls += 1
        headers = {**self._headers, "Idempotency-Key": f"{self._call_prefix}-{self._calls}"}
        span = tracing.chat_started(model, "traingate")
        try:
            response, elapsed = await self._exchange(
                self._chat_url, body, headers, self.max_retries, on_attempt=self._on_attempt
            )
            result = self._parse_completion(response)
        except BaseException as exc:
            tracing.failed(span, exc)
            raise
        if span is not None:
            tracing.chat_finished(span, result.usage, result.finish_reason)
        if self._on_chat is not None:
            self._on_chat(elapsed)
        self._llm_latency_ms += elapsed * 1000.0
        self._num_llm_calls += 1
        if result.usage:
            self._prompt_tokens += _as_count(result.usage.get("prompt_tokens"))
            self._response_tokens += _as_count(result.usage.get("completion_tokens"))
        return result

    def _chat_body(
        self,
        messages: Any,
        model: Any,
        temperature: Any,
        top_p: Any,
        max_tokens: Any,
        stop: list[str] | None,
        logprobs: Any,
    ) -> bytes:
        try:
            request = CompletionsRequest(
                model=model,
                messages=messages,
                rollout_id=self.rollout_id,
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                stop=stop,
                logprobs=logprobs,
            )
        except ValidationError as exc:
            raise RolloutValueError(f"cannot send the chat request: {exc}") from exc
        if not self._openai_body:
            return _encode(request, "the chat messages")
        try:
            fields = request.model_dump(mode="json", exclude_none=True, exclude={"rollout_id"})
            if self._tools:
                fields["tools"] = self._tools
            return json.dumps(fields, allow_nan=False).encode()
        except ValueError as exc:  # PydanticSerializationError too: a value JSON cannot carry
            raise RolloutValueError(f"cannot send the chat messages: not valid JSON ({exc})") from exc

    @staticmethod
    def _parse_completion(response: TransportResponse) -> CompletionsResult:
        status = response.status
        try:
            data = json.loads(response.body)
        except ValueError as exc:
            raise OsmosisServerError(
                f"TrainGate answered {status} to the chat completion with a body that is not JSON: "
                f"{_error_text(response)}",
                status,
            ) from exc
        choices = data.get("choices") if isinstance(data, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or not isinstance(choice, dict):
            raise OsmosisServerError(
                f"TrainGate answered {status} to the chat completion without choices[0].message: "
                f"{_error_text(response)}",
                status,
            )
        usage = data.get("usage")
        return CompletionsResult(
            message=message,
            token_ids=data.get("token_ids") or [],
            logprobs=data.get("logprobs") or [],
            usage=usage if isinstance(usage, dict) else {},
            finish_reason=choice.get("finish_reason") or "stop",
        )

    # -- completion --------------------------------------------------------------------------

    async def complete_rollout(
        self,
        status: str | RolloutStatus,
        final_messages: list[MessageDict],
        finish_reason: str | None = "stop",
        error_message: str | None = None,
        metrics: RolloutMetrics | None = None,
        reward: float | None = None,
    ) -> None:
        """Report the rollout's outcome to TrainGate (``RolloutResponse`` JSON, nulls left out).

        ``metrics`` defaults to this client's LLM counters; a dict of its fields is accepted too.
        Anything that does not fit ``RolloutResponse`` (an invalid ``status``, ``final_messages`` that
        are not a list of dicts, a non-string ``finish_reason`` or ``error_message``, non-JSON messages)
        or a ``reward`` the score rule refuses (a bool, a string, NaN) raises ``RolloutValueError``
        before anything is sent.
        """
        body = self.encode_completion(status, final_messages, finish_reason, error_message, metrics, reward)
        await self._exchange(
            self.server_url + COMPLETED_PATH, body, self._headers, self.complete_rollout_retries
        )
        logger.debug("Rollout %s: completion acknowledged by TrainGate", self.rollout_id)

    def encode_completion(
        self,
        status: str | RolloutStatus,
        final_messages: list[MessageDict],
        finish_reason: str | None = "stop",
        error_message: str | None = None,
        metrics: RolloutMetrics | None = None,
        reward: float | None = None,
        *,
        reward_error: str | None = None,
    ) -> bytes:
        """The body :meth:`complete_rollout` sends, checked and encoded (``RolloutValueError`` if it cannot be).

        ``reward`` goes by the score rule (:func:`~osmosis_ai.rewards.score.agent_reward`).
        ``reward_error`` is that rule's refusal of the agent's reward, sent in ``extra_fields`` instead
        of a reward (see :data:`~osmosis_ai.rollout.core.schemas.REWARD_ERROR_FIELD`).
        """
        _check_completion_fields(final_messages, finish_reason, error_message)
        try:
            reward = agent_reward(reward)
        except RewardReturnError as exc:
            raise RolloutValueError(str(exc)) from None
        extra_fields = {REWARD_ERROR_FIELD: reward_error} if reward_error is not None else {}
        try:
            response = RolloutResponse(
                rollout_id=self.rollout_id,
                status=_status(status),
                final_messages=final_messages,
                finish_reason=finish_reason,
                error_message=error_message,
                reward=reward,
                metrics=_metrics(metrics if metrics is not None else self.get_metrics()),
                extra_fields=extra_fields,
            )
        except ValidationError as exc:
            raise RolloutValueError(f"cannot send the rollout completion: {exc}") from exc
        return _encode(response, "the rollout completion")

    async def send_completion(
        self,
        body: bytes,
        *,
        window_seconds: float,
        wake: asyncio.Event | None = None,
        on_attempt: Callable[[int | None], object] | None = None,
    ) -> None:
        """POST an encoded completion, retrying for up to ``window_seconds`` instead of a retry count.

        The back-off grows to ``retry_max_delay``; a ``Retry-After`` is honoured up to the rest of
        the window. Setting ``wake`` cuts the current wait short (a retried init says TrainGate is
        back). Raises like :meth:`complete_rollout` once the window is over or the answer is final.
        ``on_attempt`` hears how each POST ended: TrainGate's status, or ``None`` without an answer.
        """
        until = Deadline.after(window_seconds)

        async def sleep(seconds: float) -> None:
            seconds = min(seconds, until.remaining())
            if wake is None:
                await asyncio.sleep(seconds)
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), seconds)
            wake.clear()

        await self._exchange(
            self.server_url + COMPLETED_PATH,
            body,
            self._headers,
            0,
            until=until,
            sleep=sleep,
            on_attempt=on_attempt,
        )

    def get_metrics(self) -> RolloutMetrics:
        """LLM counters of this client: latency of successful calls, calls, prompt/response tokens."""
        return RolloutMetrics(
            llm_latency_ms=self._llm_latency_ms,
            num_llm_calls=self._num_llm_calls,
            prompt_tokens=self._prompt_tokens,
            response_tokens=self._response_tokens,
        )

    # -- HTTP ----------------------------------------------------------------------------------

    async def _exchange(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        retries: int,
        *,
        until: Deadline | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        on_attempt: Callable[[int | None], object] | None = None,
    ) -> tuple[TransportResponse, float]:
        """POST with the retry policy of the module docstring; returns a 2xx answer and its duration.

        With ``until`` attempts go on until it passes instead of ``retries`` extra ones.
        """
        settings = self.settings
        transport = self._transport or get_shared_transport(settings.max_connections)
        policy = RetryPolicy(
            max_attempts=max(retries, 0) + 1 if until is None else sys.maxsize,
            base_delay=settings.retry_base_delay,
            max_delay=settings.retry_max_delay,
            max_retry_after=settings.retry_max_delay if until is None else math.inf,
            sleep=sleep or asyncio.sleep,
        )
        attempts = 0

        async def attempt() -> tuple[TransportResponse, float]:
            nonlocal attempts
            attempts += 1
            started = time.perf_counter()
            try:
                response = await transport.post(
                    url, body, headers, self.timeout_seconds, settings.connect_timeout_seconds
                )
            except NoAnswer as exc:
                if on_attempt is not None:
                    on_attempt(None)
                error = OsmosisTimeoutError(str(exc)) if exc.timed_out else OsmosisTransportError(str(exc))
                raise _Retryable(error, None) from exc
            if on_attempt is not None:
                on_attempt(response.status)
            if 200 <= response.status < 300:
                return response, time.perf_counter() - started
            raise _Retryable(self._retryable_error(url, response), parse_retry_after(response.retry_after))

        def log(number: int, exc: Exception, wait: float) -> None:
            self._log_failure(
                logging.WARNING,
                "retry",
                url,
                exc,
                "Rollout %s: attempt %d%s of POST %s failed (%s); retrying in %.2fs",
                self.rollout_id,
                number,
                "" if until is not None else f"/{policy.max_attempts}",
                url,
                exc,
                wait,
            )

        try:
            return await retrying(
                attempt,
                policy,
                retryable=lambda exc: isinstance(exc, _Retryable),
                retry_after=lambda exc: exc.retry_after if isinstance(exc, _Retryable) else None,
                give_up=None if until is None else lambda _wait: until.remaining() == 0,
                on_retry=log,
            )
        except _Retryable as exc:
            self._log_failure(
                logging.ERROR,
                "failed",
                url,
                exc,
                "Rollout %s: POST %s failed after %d attempts: %s",
                self.rollout_id,
                url,
                attempts,
                exc,
            )
            raise exc.error from exc.__cause__

    def _log_failure(
        self, level: int, kind: str, url: str, exc: Exception, message: str, *args: object
    ) -> None:
        if self._failures is None:
            logger.log(level, message, *args)
            return
        error = exc.error if isinstance(exc, _Retryable) else exc
        status = getattr(error, "status_code", None)
        why = f"HTTP {status}" if status is not None else "no answer"
        self._failures.log(
            level, f"POST {url.rpartition('/v1/')[2]} {kind} ({why})", endpoint_of(url), message, *args
        )

    def _retryable_error(self, url: str, response: TransportResponse) -> OsmosisRolloutError:
        """The error to retry for a non-2xx answer; raises at once when the status is not retryable."""
        status = response.status
        text = f"TrainGate answered {status} to POST {url}: {_error_text(response, self.api_key)}"
        if is_retryable_status(status):
            return OsmosisServerError(text, status) if status >= 500 else OsmosisValidationError(text, status)
        if 400 <= status < 500:
            logger.error("Rollout %s: TrainGate rejected POST %s with %d", self.rollout_id, url, status)
            raise OsmosisValidationError(text, status)
        raise OsmosisValidationError(f"Unexpected status code {status}", status)
