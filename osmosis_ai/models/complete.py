"""One chat completion from any model: the route decided once, the call, the reply parsed one way.

:func:`route` decides where a model's requests go, from the model's name and an optional base URL,
the same way for every caller (the judge, ``osmosis test``/``eval``, the local TrainGate's policy):

* no base URL: a named provider through LiteLLM; a bare name (``gpt-4o-mini``) is OpenAI's;
* a base URL: an OpenAI-compatible server (vLLM, SGLang, a proxy), called directly over the SDK's
  shared aiohttp pool (:mod:`osmosis_ai.models.openai_compat`) — or through LiteLLM when
  ``OSMOSIS_FORCE_LITELLM=1`` is set (or ``force_litellm=True`` passed). The name is the one the
  server serves: a bare or organisation-prefixed name (``Qwen/Qwen2.5-7B``) is sent as it is,
  ``openai/`` and ``hosted_vllm/`` are dropped. Without a key a placeholder (:data:`NO_KEY`) is sent:
  local servers ignore it, OpenAI-style clients insist on one, and the provider's own key variable
  is never sent to someone else's server;
* a base URL with a name whose prefix is another LiteLLM provider (``ollama/qwen2.5``, or
  OpenAI's Responses route ``openai/responses/...``): that provider's own API at that address,
  through LiteLLM;
* ``scripted``: the offline calculator solver (:mod:`osmosis_ai.models.scripted`), no network
  and no key; it takes no base URL.

:func:`complete` sends one request (never streamed) and returns a :class:`Completion`; failures
raise a classified :class:`~osmosis_ai.models.errors.ModelCallError`. Retrying is the caller's:
:func:`osmosis_ai._http.retrying` with :func:`transient` and :func:`retry_after`.
:func:`preflight` checks the provider's key variables, then asks for one token; it raises only
what no row could get past.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai._litellm import aimport_litellm
from osmosis_ai.models import keys, openai_compat, rendering, scripted
from osmosis_ai.models import litellm as _litellm
from osmosis_ai.models.concurrency import CallObserver, CallOutcome
from osmosis_ai.models.errors import PREFLIGHT, ModelCallError, ModelRouteError
from osmosis_ai.observe import tracing

logger = logging.getLogger(__name__)

NO_KEY = "EMPTY"
"""The key sent to an OpenAI-compatible server when none is given (vLLM's documented placeholder)."""

SCRIPTED = "scripted"
"""The offline calculator solver's model name."""

FORCE_LITELLM_ENV = "OSMOSIS_FORCE_LITELLM"
"""Set to ``1`` to send requests to OpenAI-compatible base URLs through LiteLLM instead of directly."""

OPENAI_COMPATIBLE = frozenset({"openai", "hosted_vllm"})
"""Name prefixes that mean "the OpenAI-compatible server at the base URL"; dropped from the name."""


@dataclass(frozen=True)
class Route:
    """Where one model's requests go: LiteLLM's model id, the base URL and the key (never in ``repr``).

    Behind a base URL that serves OpenAI's API, ``model`` is ``openai/<the name the server serves>``.
    ``via`` says who sends the requests: ``"openai"`` (the direct path to such a base URL),
    ``"litellm"``, or ``"scripted"`` (offline).
    """

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    via: str = "litellm"


def _needs_provider_list(model: str, api_base: str | None) -> bool:
    prefix, slash, _ = model.partition("/")
    return bool(api_base) and bool(slash) and prefix not in OPENAI_COMPATIBLE


def _forced() -> bool:
    return os.environ.get(FORCE_LITELLM_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def route(
    model: str, *, api_base: str | None = None, api_key: str | None = None, force_litellm: bool | None = None
) -> Route:
    """The :class:`Route` of ``model`` (see the module docstring).

    ``force_litellm`` (default: the ``OSMOSIS_FORCE_LITELLM`` variable) sends an OpenAI-compatible
    base URL's requests through LiteLLM. A base URL with a prefixed name other than
    ``openai/``/``hosted_vllm/`` needs LiteLLM's provider list, and so imports LiteLLM; async code
    calls :func:`aroute` instead.
    """
    model = model.strip()
    api_base = api_base or None
    if model == SCRIPTED:
        if api_base is not None:
            raise ModelRouteError(
                f"'{SCRIPTED}' is the offline calculator solver and takes no base URL; to use the model "
                f"served at {api_base}, give the name it serves"
            )
        return Route(SCRIPTED, via=SCRIPTED)
    if api_base is None:
        return Route(model if "/" in model else f"openai/{model}", None, api_key)
    prefix, slash, rest = model.partition("/")
    if slash and prefix in OPENAI_COMPATIBLE and not rest.startswith("responses/"):
        served = rest
    elif slash and (prefix in OPENAI_COMPATIBLE or _litellm.is_provider(prefix)):
        return Route(model, api_base, api_key)
    else:
        served = model
    via = "litellm" if (_forced() if force_litellm is None else force_litellm) else "openai"
    return Route(f"openai/{served}", api_base, api_key or NO_KEY, via)


async def aroute(
    model: str, *, api_base: str | None = None, api_key: str | None = None, force_litellm: bool | None = None
) -> Route:
    """:func:`route` for async code: LiteLLM, when the name needs it, is imported off the event loop."""
    if _needs_provider_list(model.strip(), api_base or None):
        await aimport_litellm()
    return route(model, api_base=api_base, api_key=api_key, force_litellm=force_litellm)


@dataclass(frozen=True)
class Completion:
    """A model's reply, parsed the same way from every route.

    ``message`` is the first choice's message with the fields that carry a value (``None`` when the
    reply has no choice); ``usage`` the token counts (``None`` when not reported); ``token_ids``,
    ``logprobs`` and ``prompt_token_ids`` the per-token data an OpenAI-compatible server such as
    vLLM reports (``None`` when it does not); ``raw`` the whole reply as plain data.
    """

    message: dict[str, Any] | None
    finish_reason: str
    usage: dict[str, int] | None
    token_ids: list[int] | None
    logprobs: list[float] | None
    prompt_token_ids: list[int] | None
    raw: Any


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def _token_data(choice: Mapping[str, Any]) -> tuple[list[int] | None, list[float] | None]:
    """Completion ids and log-probabilities: vLLM's ``token_ids``, or ``token_id:<n>`` logprob tokens."""
    logprobs = choice.get("logprobs")
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    values = [float(e["logprob"]) for e in entries if isinstance(e.get("logprob"), (int, float))]
    token_ids = _int_list(choice.get("token_ids"))
    if token_ids is None and entries:
        tokens = [str(e.get("token") or "") for e in entries]
        if all(t.startswith("token_id:") and t[9:].isdigit() for t in tokens):
            token_ids = [int(t[9:]) for t in tokens]
    return token_ids, values or None


def parse(raw: Any) -> Completion:
    """The :class:`Completion` in a chat-completion reply given as plain data."""
    data = raw if isinstance(raw, dict) else {}
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    if isinstance(message, dict):
        message = {k: v for k, v in message.items() if v is not None and not (k == "tool_calls" and not v)}
    else:
        message = None
    usage = data.get("usage")
    counts = None
    if isinstance(usage, dict):
        counts = {k: int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    token_ids, logprobs = _token_data(choice)
    return Completion(
        message=message,
        finish_reason=str(choice.get("finish_reason") or "stop"),
        usage=counts,
        token_ids=token_ids,
        logprobs=logprobs,
        prompt_token_ids=_int_list(data.get("prompt_token_ids")),
        raw=raw,
    )


async def complete(
    route: Route,
    messages: list[dict[str, Any]],
    *,
    timeout: float,
    observer: CallObserver | None = None,
    **params: Any,
) -> Completion:
    """Send ``messages`` to the model of ``route`` once; ``params`` are the request's other fields.

    ``params`` are sent as they are (``temperature``, ``max_tokens``, ``tools``, ``response_format``,
    ``extra_body``...), except ``stream``: replies are never streamed. ``observer`` (an adaptive
    concurrency limit) hears how the call ended and how long it took. With tracing on
    (:mod:`osmosis_ai.observe.tracing`) the call is one ``chat`` span.

    Raises:
        ModelCallError: the call failed (see :mod:`osmosis_ai.models.errors`).
    """
    span = tracing.chat_started(route.model, _provider(route))
    try:
        completion = await _observed(route, messages, timeout, observer, params)
    except BaseException as exc:
        tracing.failed(span, exc)
        raise
    if span is not None:
        raw = completion.raw
        model = raw.get("model") if isinstance(raw, dict) else None
        tracing.chat_finished(span, completion.usage, completion.finish_reason, model)
    return completion


def _provider(route: Route) -> str:
    """The GenAI ``gen_ai.provider.name`` of a route: LiteLLM's provider prefix, else who sends it."""
    prefix, slash, _ = route.model.partition("/")
    return prefix if slash else route.via


async def _observed(
    route: Route,
    messages: list[dict[str, Any]],
    timeout: float,
    observer: CallObserver | None,
    params: dict[str, Any],
) -> Completion:
    if observer is None:
        return await _complete(route, messages, timeout=timeout, **params)
    started = time.monotonic()
    try:
        completion = await _complete(route, messages, timeout=timeout, **params)
    except ModelCallError as exc:
        observer.observe(_call_outcome(exc), time.monotonic() - started, retry_after=exc.retry_after)
        raise
    observer.observe(CallOutcome.SUCCESS, time.monotonic() - started)
    return completion


def _call_outcome(exc: ModelCallError) -> CallOutcome:
    if exc.kind == "rate_limit" or exc.status in (429, 503):
        return CallOutcome.REFUSED
    if exc.kind == "timeout":
        return CallOutcome.TIMEOUT
    return CallOutcome.ERROR


async def _complete(
    route: Route, messages: list[dict[str, Any]], *, timeout: float, **params: Any
) -> Completion:
    params.pop("stream", None)
    if route.via == "openai":
        raw = await openai_compat.acomplete(
            route.model[len("openai/") :],
            messages,
            api_base=route.api_base or "",
            api_key=route.api_key or NO_KEY,
            timeout=timeout,
            params=params,
        )
        return parse(raw)
    if route.via == SCRIPTED:
        message, finish_reason = scripted.reply(messages, params.get("tools") or [])
        usage = rendering.byte_usage(messages, message)
        return parse(
            {"choices": [{"index": 0, "message": message, "finish_reason": finish_reason}], "usage": usage}
        )
    raw = await _litellm.acomplete(
        route.model, messages, api_key=route.api_key, api_base=route.api_base, timeout=timeout, params=params
    )
    return parse(raw)


def transient(exc: Exception) -> bool:
    """Whether a failed call is worth asking again (the ``retryable`` of :func:`osmosis_ai._http.retrying`)."""
    return isinstance(exc, ModelCallError) and exc.transient


def retry_after(exc: Exception) -> float | None:
    """The server's ``Retry-After`` hint of a failed call (the ``retry_after`` of ``retrying``)."""
    return exc.retry_after if isinstance(exc, ModelCallError) else None


async def preflight(route: Route, *, timeout: float = 30.0, **params: Any) -> None:
    """Check that the model of ``route`` can answer; raise what no other request could get past.

    No request is sent when no key was given and the provider's key variable is unset (the common
    providers' table in :mod:`osmosis_ai.models.keys`, read before LiteLLM is imported, else
    LiteLLM's): that raises a ``missing_key`` failure naming it. Then one token is asked for;
    ``params`` are the run's own request fields, so the check takes the run's route (tools and token
    limits are left out). A systemic failure (bad key, unknown model, unroutable name, an endpoint
    that does not answer) or LiteLLM failing in its own code raises; anything else (a rate limit
    proves key and model good) is logged at debug level and left for the run's own retries.

    Raises:
        ModelCallError: a failure of a kind in :data:`~osmosis_ai.models.errors.PREFLIGHT`.
    """
    if route.via == SCRIPTED:
        return
    if route.api_key is None:
        names = keys.missing_key_variables(route.model)  # the common providers, without LiteLLM
        if names is None:
            await aimport_litellm()  # its table of key variables; off the event loop the first time
            names = _litellm.missing_keys(route.model)
        if names:
            raise ModelCallError(keys.key_hint(names), kind="missing_key")
    params = {k: v for k, v in params.items() if k not in ("max_tokens", "tools")}
    try:
        await complete(route, [{"role": "user", "content": "hi"}], timeout=timeout, max_tokens=1, **params)
    except ModelCallError as exc:
        if exc.kind in PREFLIGHT:
            raise
        logger.debug("preflight of %s ended in a %s failure; the run goes on: %s", route.model, exc.kind, exc)
