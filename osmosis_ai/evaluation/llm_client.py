"""``ExternalLLMClient``: an agent's LLM calls answered by any LiteLLM model, for local runs.

One client serves a whole run. The per-row state — the tools offered to the model and the call
counters — lives in a context variable, so rows running as separate asyncio tasks each see their
own after :meth:`ExternalLLMClient.reset_metrics`, while the provider connections are shared.

Failures are classified by :mod:`osmosis_ai.evaluation.providers`:

* transient ones (rate limit, server error, timeout, dropped connection) are retried with the SDK's
  one policy (:class:`osmosis_ai._http.RetryPolicy`: exponential back-off with jitter, never sooner
  than the provider's ``Retry-After``); each retry is counted;
* systemic ones (bad key, exhausted budget, unknown model, unroutable model name, an endpoint that
  still does not answer after the retries) raise :class:`SystemicProviderError`: no other row can
  succeed either, so a runner stops the run;
* anything else raises :class:`ProviderError`: this row fails, the run goes on.

LiteLLM is imported on the first call (off the event loop), not when the client is built.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai import _http
from osmosis_ai._litellm import aimport_litellm
from osmosis_ai.evaluation.errors import ProviderCheckError, ProviderError, SystemicProviderError
from osmosis_ai.evaluation.providers import (
    ProviderFailure,
    classify_provider_error,
    describe_failure,
    preflight,
)

DEFAULT_MODEL = "gpt-5-mini"
DEFAULT_TIMEOUT = 120.0
_RETRIED_KINDS = frozenset({"rate_limit", "server", "timeout", "connection"})


@dataclass
class _RowState:
    tools: list[dict[str, Any]] | None = None
    latency_ms: float = 0.0
    calls: int = 0
    prompt_tokens: int = 0
    response_tokens: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)


def _routing_id(model: str, api_base: str | None) -> str:
    """The LiteLLM model id: behind a base URL every name is an OpenAI-compatible model; a bare name is OpenAI's."""
    if api_base:
        return model if model.startswith("openai/") else f"openai/{model}"
    return model if "/" in model else f"openai/{model}"


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _plain_message(raw: Any) -> dict[str, Any]:
    data = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw or {})
    return {k: v for k, v in data.items() if v is not None}


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None) or getattr(
        exc, "litellm_response_headers", None
    )
    return _http.retry_after_from(headers)


class ExternalLLMClient:
    """Answers ``chat_completions`` with ``model`` through LiteLLM (see the module docstring)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        api_base: str | None = None,
        *,
        retry: _http.RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not model or not model.strip():
            raise ValueError("model must be a non-empty model name, e.g. openai/gpt-5-mini")
        self.display_name = model
        self.model = _routing_id(model, api_base)
        self._api_key = api_key
        self._api_base = api_base
        self.retry = retry or _http.RetryPolicy()
        self.timeout = timeout
        self._state: contextvars.ContextVar[_RowState] = contextvars.ContextVar(f"osmosis-llm-{id(self)}")
        self._state.set(_RowState())

    @property
    def api_key(self) -> str | None:
        return self._api_key

    @property
    def api_base(self) -> str | None:
        return self._api_base

    # -- per-row state ----------------------------------------------------------------------------------

    def _row(self) -> _RowState:
        try:
            return self._state.get()
        except LookupError:  # a context copied before the client existed
            state = _RowState()
            self._state.set(state)
            return state

    def set_tools(self, tools: list[Any] | None) -> None:
        """Offer ``tools`` (dicts or pydantic tool schemas) to the model on this row's calls."""
        dumped = [
            t.model_dump(exclude_none=True) if hasattr(t, "model_dump") else dict(t) for t in tools or []
        ]
        self._row().tools = dumped or None

    def clear_tools(self) -> None:
        self._row().tools = None

    def reset_metrics(self) -> None:
        """Start a new row: fresh counters and no tools, for the calling task only."""
        self._state.set(_RowState())

    def get_metrics(self) -> Any:
        from osmosis_ai.rollout.core.schemas import RolloutMetrics

        row = self._row()
        return RolloutMetrics(
            llm_latency_ms=row.latency_ms,
            num_llm_calls=row.calls,
            prompt_tokens=row.prompt_tokens,
            response_tokens=row.response_tokens,
        )

    @property
    def retries(self) -> int:
        """Transient failures retried on this row's calls so far."""
        return self._row().retries

    @property
    def failed_calls(self) -> int:
        """This row's calls that ended in a provider error (after any retries)."""
        return len(self._row().errors)

    # -- calls ------------------------------------------------------------------------------------------

    def _route(self) -> dict[str, Any]:
        route: dict[str, Any] = {}
        if self._api_key:
            route["api_key"] = self._api_key
        elif self._api_base:
            route["api_key"] = "not-needed"  # local servers ignore it; the OpenAI client insists on one
        if self._api_base:
            route["api_base"] = self._api_base
        return route

    def _raise(self, failure: ProviderFailure, exc: BaseException, *, exhausted: bool) -> None:
        self._row().errors.append(failure.kind)
        if failure.systemic:
            raise SystemicProviderError(
                describe_failure(self.display_name, failure), kind=failure.kind, status=failure.status
            ) from exc
        status = f" (HTTP {failure.status})" if failure.status else ""
        why = f"after {self.retry.max_attempts} attempts: " if exhausted else ""
        raise ProviderError(
            f"model {self.display_name!r} call failed{status}: {why}{failure.message}",
            kind=failure.kind,
            status=failure.status,
        ) from exc

    async def chat_completions(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """The model's next message for ``messages``; ``kwargs`` are sampling parameters passed on."""
        from osmosis_ai.rollout.client import CompletionsResult

        litellm = await aimport_litellm()
        row = self._row()
        request: dict[str, Any] = {**kwargs, **self._route(), "num_retries": 0, "max_retries": 0}
        request.setdefault("timeout", self.timeout)
        if row.tools:
            request["tools"] = row.tools
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                response = await litellm.acompletion(model=self.model, messages=messages, **request)
            except Exception as exc:
                row.latency_ms += (time.monotonic() - started) * 1000
                failure = classify_provider_error(exc)
                retryable = failure.kind in _RETRIED_KINDS
                if retryable and self.retry.should_retry(attempt):
                    row.retries += 1
                    await self.retry.sleep(self.retry.delay(attempt, _retry_after(exc)))
                    continue
                if failure.kind == "connection":  # still no answer after the retries: no row will get one
                    failure = ProviderFailure("connection", True, failure.status, failure.message)
                self._raise(failure, exc, exhausted=retryable)
            row.latency_ms += (time.monotonic() - started) * 1000
            row.calls += 1
            usage = _field(response, "usage")
            prompt = int(_field(usage, "prompt_tokens") or 0) if usage is not None else 0
            completion = int(_field(usage, "completion_tokens") or 0) if usage is not None else 0
            row.prompt_tokens += prompt
            row.response_tokens += completion
            choice = (_field(response, "choices") or [None])[0]
            if choice is None:
                raise ProviderError(f"model {self.display_name!r} returned no choices", kind="bad_reply")
            return CompletionsResult(
                message=_plain_message(_field(choice, "message")),
                token_ids=[],
                logprobs=[],
                usage={
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
                finish_reason=str(_field(choice, "finish_reason") or "stop"),
            )

    async def preflight_check(self) -> None:
        """One ``max_tokens=1`` request; :class:`SystemicProviderError` if no row could succeed."""
        try:
            await preflight(self.model, self._route(), timeout=min(self.timeout, 30.0))
        except ProviderCheckError as exc:
            raise SystemicProviderError(str(exc), kind=exc.kind, status=exc.status) from exc

    async def close(self) -> None:
        """Forget this row's tools. Idempotent.

        LiteLLM's connection pools are process-wide and shared with every other client in the
        process, so they are not closed here.
        """
        self.clear_tools()

    async def __aenter__(self) -> ExternalLLMClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
