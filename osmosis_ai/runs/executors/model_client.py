"""``ExternalLLMClient``: an agent's LLM calls answered by any model, for local runs.

One client serves a whole run. The per-row state — the tools offered to the model and the call
counters — lives in a context variable, so rows running as separate asyncio tasks each see their
own after :meth:`ExternalLLMClient.reset_metrics`, while the provider connections are shared.
``model="scripted"`` is the offline calculator solver (:mod:`osmosis_ai.models.scripted`), as
everywhere a model is named.

Calls go through the model seam (:mod:`osmosis_ai.models.complete`): the route is decided once,
on the first call, and failures are classified there:

* transient ones (rate limit, server error, timeout, dropped connection) are retried with the SDK's
  one loop and policy (:func:`osmosis_ai._http.retrying`: exponential back-off with jitter, never
  sooner than the provider's ``Retry-After``); each retry is counted;
* systemic ones (bad key, exhausted budget, unknown model, unroutable model name, an endpoint that
  still does not answer after the retries) raise :class:`SystemicProviderError`: no other row can
  succeed either, so a runner stops the run;
* anything else raises :class:`ProviderError`: this row fails, the run goes on.

LiteLLM, where the route needs it, is imported on the first call (off the event loop), not when
the client is built.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osmosis_ai import _http
from osmosis_ai.models import complete as models
from osmosis_ai.models.errors import ModelCallError, ProviderError, SystemicProviderError
from osmosis_ai.models.providers import check_error, classify_provider_error, describe_failure

if TYPE_CHECKING:
    from osmosis_ai.models.concurrency import CallObserver

DEFAULT_MODEL = "gpt-5-mini"
DEFAULT_TIMEOUT = 120.0
SILENT_RETRIES = 1
"""How often a call that timed out is asked again (a silent server costs at most 2 x the timeout)."""
# Arguments of a call that the client's route decides, not the agent.
_ROUTE_KEYS = ("api_key", "api_base", "base_url", "num_retries", "max_retries")


@dataclass
class _RowState:
    tools: list[dict[str, Any]] | None = None
    latency_ms: float = 0.0
    calls: int = 0
    prompt_tokens: int = 0
    response_tokens: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)


def _label(model: str, api_base: str | None) -> str:
    """The LiteLLM-style id shown for ``model`` before its route is known: a bare name is OpenAI's."""
    if model == models.SCRIPTED:
        return model
    if api_base:
        return model if model.startswith("openai/") else f"openai/{model}"
    return model if "/" in model else f"openai/{model}"


class ExternalLLMClient:
    """Answers ``chat_completions`` with ``model`` through the model seam (see the module docstring)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        api_base: str | None = None,
        *,
        retry: _http.RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        observer: CallObserver | None = None,
    ) -> None:
        """``observer`` (an adaptive concurrency limit) hears how each model request ended."""
        if not model or not model.strip():
            raise ValueError("model must be a non-empty model name, e.g. openai/gpt-5-mini")
        self.display_name = model
        self._label = _label(model, api_base)
        self._route: models.Route | None = None
        self._api_key = api_key
        self._api_base = api_base
        self.retry = retry or _http.RetryPolicy()
        self.timeout = timeout
        self.observer = observer
        self._state: contextvars.ContextVar[_RowState] = contextvars.ContextVar(f"osmosis-llm-{id(self)}")
        self._state.set(_RowState())

    @property
    def model(self) -> str:
        """The model id requests go to (LiteLLM's spelling, e.g. ``openai/gpt-5-mini``)."""
        return self._route.model if self._route is not None else self._label

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

    async def _target(self) -> models.Route:
        if self._route is None:
            self._route = await models.aroute(
                self.display_name, api_base=self._api_base, api_key=self._api_key
            )
        return self._route

    def _raise(self, error: ModelCallError) -> None:
        failure = classify_provider_error(error)
        self._row().errors.append(failure.kind)
        if failure.systemic:
            raise SystemicProviderError(
                describe_failure(self.model, failure), kind=failure.kind, status=failure.status
            ) from error
        status = f" (HTTP {failure.status})" if failure.status else ""
        why = f"after {self.retry.max_attempts} attempts: " if error.transient else ""
        raise ProviderError(
            f"model {self.model!r} call failed{status}: {why}{failure.message}",
            kind=failure.kind,
            status=failure.status,
        ) from error

    async def chat_completions(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """The model's next message for ``messages``; ``kwargs`` are sampling parameters passed on."""
        from osmosis_ai.rollout.client import CompletionsResult

        target = self._route or await self._target()
        row = self._row()
        params = {k: v for k, v in kwargs.items() if k not in _ROUTE_KEYS}
        timeout = params.pop("timeout", None) or self.timeout
        if row.tools:
            params["tools"] = row.tools

        async def attempt() -> models.Completion:
            started = time.monotonic()
            try:
                return await models.complete(
                    target, messages, timeout=timeout, observer=self.observer, **params
                )
            finally:
                row.latency_ms += (time.monotonic() - started) * 1000

        silent = 0

        def retryable(exc: Exception) -> bool:
            # A server that took the request and said nothing for a whole timeout is asked once
            # more, not the policy's every attempt: a call costs at most two timeouts, not four.
            nonlocal silent
            if isinstance(exc, ModelCallError) and exc.kind == "timeout":
                silent += 1
                return silent <= SILENT_RETRIES
            return models.transient(exc)

        def count(number: int, exc: Exception, wait: float) -> None:
            row.retries += 1

        try:
            reply = await _http.retrying(
                attempt,
                self.retry,
                retryable=retryable,
                retry_after=models.retry_after,
                on_retry=count,
            )
        except ModelCallError as exc:
            self._raise(exc)
        row.calls += 1
        usage = reply.usage or {}
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        row.prompt_tokens += prompt
        row.response_tokens += completion
        if reply.message is None:
            raise ProviderError(f"model {self.model!r} returned no choices", kind="bad_reply")
        return CompletionsResult(
            message=reply.message,
            token_ids=[],
            logprobs=[],
            usage={
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
            finish_reason=reply.finish_reason,
        )

    async def preflight_check(self) -> None:
        """One ``max_tokens=1`` request; :class:`SystemicProviderError` if no row could succeed."""
        target = await self._target()
        try:
            await models.preflight(target, timeout=min(self.timeout, 30.0))
        except ModelCallError as exc:
            check = check_error(self.model, exc)
            raise SystemicProviderError(str(check), kind=check.kind, status=check.status) from exc

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
