"""Rollout-scoped OpenAI-compatible model URLs: ``ctx.base_url`` and ``ctx.api_key`` of a 0.2 rollout.

An agent that uses an OpenAI-compatible client instead of ``ctx.chat`` points it at its rollout's
base URL, ``http://127.0.0.1:<port>/rollouts/<rollout_id>/v1``, with the rollout's key::

    client = openai.AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key)
    reply = await client.chat.completions.create(model="policy", messages=messages)

``POST {base_url}/chat/completions`` is answered by ``ctx.chat`` itself: the same rollout identity,
retries and Idempotency-Key towards the trainer, the same metrics, and the conversation recorded for
an ERROR result. The reply is an OpenAI ``chat.completion`` (plus the trainer's ``token_ids``);
with ``"stream": true`` the same reply comes as a valid server-sent-event stream synthesized from
the whole answer, because the trainer's callback does not stream.

One listener per event loop (so per server process: ``serve --workers`` runs one in each worker,
beside its agents) on a loopback port, started when a rollout first reads ``ctx.base_url`` and
closed with the loop. A call needs the rollout's key: another rollout's key, or none, is refused
(401). A rollout that is unknown or has ended gets 404. Errors are OpenAI's error objects and carry
``x-should-retry: false``: ``ctx.chat`` has already retried, so the client must not retry again.
docs/design/rollout-server.md explains the choices.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import secrets
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from osmosis_ai._sockets import bind_listener
from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.server.api_key import authorized

if TYPE_CHECKING:
    from osmosis_ai.rollout.client import CompletionsResult
    from osmosis_ai.rollout.core.base import RolloutContext

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
BACKLOG = 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
_CONSUMED = frozenset({"messages", "stream", "stream_options", "rollout_id"})
_NO_RETRY = {"x-should-retry": "false"}


@dataclass
class ModelRoute:
    """One rollout's base URL and key on its loop's proxy; :meth:`close` ends it (calls get 404)."""

    proxy: ModelProxy
    rollout_id: str
    api_key: str
    context: RolloutContext
    scope: contextvars.Context
    """The context variables of the agent where the route was opened: its calls run with them, so what
    the LLM client keeps per rollout in them (an in-process run's counters and tools) is this rollout's."""
    calls: set[asyncio.Task[Any]] = field(default_factory=set)
    failure: BaseException | None = None
    """The last exception ``ctx.chat`` raised for a call through this route (the agent saw only HTTP)."""

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.proxy.port}/rollouts/{quote(self.rollout_id, safe='')}/v1"

    def close(self) -> None:
        """Refuse further calls and cancel those in flight: nothing reaches the trainer after the rollout."""
        self.proxy.remove(self)
        for task in list(self.calls):
            task.cancel()


def _error(status: int, message: str, kind: str, code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status, headers=_NO_RETRY)


def _failure_answer(exc: BaseException) -> web.Response:
    """The HTTP answer for what ``ctx.chat`` raised."""
    status = getattr(exc, "status_code", None)
    text = str(exc) or type(exc).__name__
    if isinstance(exc, (RolloutValueError, TypeError)):
        return _error(400, text, "invalid_request_error")
    # The trainer's refusal of the call itself (409: the rollout ended there, 422...) is passed on; a
    # refusal of the server's own key or rollout id would read as the agent's: a failed model call.
    if isinstance(status, int) and 400 <= status < 500 and status not in (401, 403, 404):
        return _error(status, text, "invalid_request_error")
    return _error(502, f"the model call failed: {text}", "api_error", "upstream_error")


def _completion(result: CompletionsResult, model: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model if isinstance(model, str) else "default",
        "choices": [
            {"index": 0, "message": result.message, "finish_reason": result.finish_reason, "logprobs": None}
        ],
        "token_ids": result.token_ids,
    }
    if result.usage:
        body["usage"] = result.usage
    return body


def _sse(completion: dict[str, Any], include_usage: bool) -> bytes:
    """The whole reply as ``chat.completion.chunk`` events: the message, the finish, usage if asked, DONE."""
    message = completion["choices"][0]["message"]
    delta: dict[str, Any] = {"role": message.get("role") or "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [
            {"index": index, **call}
            for index, call in enumerate(message["tool_calls"])
            if isinstance(call, dict)
        ]
    head = {key: completion[key] for key in ("id", "created", "model")}

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        event = {**head, "object": "chat.completion.chunk", "choices": choices, **extra}
        return b"data: " + json.dumps(event).encode() + b"\n\n"

    finish = completion["choices"][0]["finish_reason"]
    events = [
        chunk([{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}]),
        chunk([{"index": 0, "delta": {}, "finish_reason": finish, "logprobs": None}]),
    ]
    if include_usage:
        events.append(chunk([], usage=completion.get("usage")))
    events.append(b"data: [DONE]\n\n")
    return b"".join(events)


class ModelProxy:
    """The loopback listener of one event loop serving every open :class:`ModelRoute` of it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # Listening at once: a client connecting before the server task runs waits in the backlog.
        self._sock = bind_listener(HOST)
        self._sock.listen(BACKLOG)
        self.port: int = self._sock.getsockname()[1]
        self._routes: dict[str, list[ModelRoute]] = {}
        self._runner: web.AppRunner | None = None
        self._closer: AsyncGenerator[None, None] | None = None
        self._closed = False
        self._started = loop.create_task(self._serve())

    async def _serve(self) -> None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/rollouts/{rollout_id}/v1/chat/completions", self._handle)
        app.router.add_route("*", "/{path:.*}", self._elsewhere)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True)
        try:
            await self._runner.setup()
            await web.SockSite(self._runner, self._sock, backlog=BACKLOG).start()
        except Exception:
            # Calls waiting in the backlog are refused at once instead of waiting out their timeout.
            logger.exception("the rollout model URL listener on port %d did not start", self.port)
            await self.aclose()
            return
        self._closer = self._close_at_loop_shutdown()
        await self._closer.asend(None)  # parked: the loop's shutdown_asyncgens() resumes it

    async def _close_at_loop_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Stop listening and end the connections (idempotent); the loop's next route starts a new proxy."""
        if self._closed:
            return
        self._closed = True
        if _proxies.get(self.loop) is self:
            del _proxies[self.loop]
        if not self._started.done() and self._started is not asyncio.current_task():
            self._started.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._started
        if self._runner is not None:
            await self._runner.cleanup()
        self._sock.close()

    def open(self, context: RolloutContext) -> ModelRoute:
        route = ModelRoute(
            self, context.request.rollout_id, secrets.token_urlsafe(32), context, contextvars.copy_context()
        )
        self._routes.setdefault(route.rollout_id, []).append(route)
        return route

    def remove(self, route: ModelRoute) -> None:
        routes = self._routes.get(route.rollout_id, [])
        if route in routes:
            routes.remove(route)
        if not routes:
            self._routes.pop(route.rollout_id, None)

    def _find(self, request: web.Request, rollout_id: str) -> ModelRoute | web.Response:
        routes = self._routes.get(rollout_id)
        if not routes:
            return _error(
                404,
                f"no rollout {rollout_id!r} is running here (unknown, or it has ended)",
                "invalid_request_error",
                "rollout_not_found",
            )
        header = request.headers.get("Authorization")
        for route in routes:
            if authorized(header, route.api_key):
                return route
        why = "missing" if not header else "wrong"
        logger.warning("model call for rollout %s refused: %s key", rollout_id, why)
        return _error(
            401,
            f"{why} API key for rollout {rollout_id!r}: use ctx.api_key",
            "invalid_request_error",
            "invalid_api_key",
        )

    async def _elsewhere(self, request: web.Request) -> web.Response:
        return _error(
            404,
            f"no endpoint {request.method} {request.path}: POST <ctx.base_url>/chat/completions",
            "invalid_request_error",
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        found = self._find(request, request.match_info["rollout_id"])
        if isinstance(found, web.Response):
            return found
        task = asyncio.current_task()
        assert task is not None
        found.calls.add(task)
        try:
            return await self._chat(request, found)
        finally:
            found.calls.discard(task)

    async def _chat(self, request: web.Request, route: ModelRoute) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            return _error(400, f"the request body is not JSON: {exc}", "invalid_request_error")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            return _error(
                400, "the request body needs 'messages', a list of messages", "invalid_request_error"
            )
        params = {k: v for k, v in body.items() if k not in _CONSUMED and v is not None}
        if "max_completion_tokens" in params:
            completion_tokens = params.pop("max_completion_tokens")
            params.setdefault("max_tokens", completion_tokens)
        try:
            # A task made inside the agent's context variables (create_task copies the current ones).
            call = route.scope.run(self.loop.create_task, route.context.chat(messages, **params))
            result = await call
        except Exception as exc:
            route.failure = exc
            return _failure_answer(exc)
        completion = _completion(result, params.get("model"))
        if body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            return web.Response(
                body=_sse(completion, include_usage),
                content_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        return web.json_response(completion)


_proxies: dict[asyncio.AbstractEventLoop, ModelProxy] = {}


def open_route(context: RolloutContext) -> ModelRoute:
    """A new route for ``context`` on the running loop's proxy (started on first use)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "ctx.base_url and ctx.api_key are served on the rollout's event loop: read them first "
            "inside the agent's async run()"
        ) from None
    proxy = _proxies.get(loop)
    if proxy is None:
        for stale in [other for other in _proxies if other.is_closed()]:  # loops that ended unclosed
            del _proxies[stale]
        proxy = _proxies[loop] = ModelProxy(loop)
    return proxy.open(context)
