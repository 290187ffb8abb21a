"""The RolloutServer's HTTP endpoints: ``POST /v1/rollout/init``, ``GET /health``, ``GET /platform/health``,
``GET /metrics``.

Init passes one gate, :class:`InitGate`, an ASGI middleware in front of the application, which
checks each thing once, in this order:

* admission: at most ``max_concurrent_inits`` inits are inside at once; the rest wait before any of
  their request is read. An init that waits inside (for ``get_tools`` in its worker thread, for a
  duplicate's first answer) holds its parsed body and a stack of framework frames; when thousands
  arrive in one burst they would all be inside at once. The ``init admission`` line of
  ``benchmarks/rollout_server.py`` measures the difference;
* the API key (401), then the body size (413 for a declared length over the limit, before the body
  is read; a chunked body is refused as soon as it grows past it): an unauthenticated caller learns
  nothing about the schema and costs the server nothing, and an oversized body is never buffered;
* the body, read once. A JSON (or absent) ``Content-Type`` whose body validates in one
  ``RolloutRequest.model_validate_json`` call goes straight to the endpoint, skipping Starlette's
  routing, middleware and request wrappers (the ``init fast path`` line of the benchmark measures
  what that buys). Everything else — a body that does not validate, another content type — goes on
  to the FastAPI route with the body replayed, so every 400/422 answer is FastAPI's own. A body
  without a ``Content-Type`` is read as JSON, the protocol's only body type (FastAPI versions differ
  on that). A body over :data:`OFF_LOOP_BYTES` is validated in a worker thread, and when it is JSON
  that does not validate, the 422 is built there from that one validation, in FastAPI's shape
  (``loc`` starting with ``"body"``), instead of FastAPI parsing and validating it again on the loop.

Every 422 echoes a bounded part of each offending input (:func:`echoed`): an init carrying a
million metadata keys gets a few kilobytes back, not the megabytes it sent.

The gate also counts every init answer by status code for ``/metrics``, and continues the trace an
init's ``traceparent`` header names (:mod:`osmosis_ai.observe.tracing`), so the rollout's span is
a child of the trainer's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from osmosis_ai._usercode import forget_traceback
from osmosis_ai.observe import tracing
from osmosis_ai.rollout.core.schemas import RolloutRequest
from osmosis_ai.rollout.server.api_key import authorized
from osmosis_ai.rollout.server.executor import _InitRefused

if TYPE_CHECKING:
    from osmosis_ai.observe.metrics import ServerMetrics
    from osmosis_ai.rollout.server.config import ServerConfig
    from osmosis_ai.rollout.server.executor import RolloutExecutor
    from osmosis_ai.rollout.server.state import AppState
    from osmosis_ai.rollout.server.workers import WorkerSlot

logger = logging.getLogger(__name__)

INIT_PATH = "/v1/rollout/init"
UNAUTHORIZED = {"detail": "Invalid or missing API key"}
_JSON = (b"content-type", b"application/json")
OFF_LOOP_BYTES = 1024 * 1024  # validating more takes tens of milliseconds; the thread hop costs tens of µs
ECHO_ITEMS = 64  # values of an offending input shown back in a 422, in all
ECHO_CHARS = 256  # characters of one string shown back


def echoed(value: Any) -> Any:
    """``value`` as a 422 may show it back: at most :data:`ECHO_ITEMS` values in all, strings cut at
    :data:`ECHO_CHARS` characters, what is left out counted."""
    room = [ECHO_ITEMS]

    def shown(item: Any) -> Any:
        room[0] -= 1
        if isinstance(item, str):
            return item if len(item) <= ECHO_CHARS else f"{item[:ECHO_CHARS]}... ({len(item)} characters)"
        if isinstance(item, dict):
            kept: dict[str, Any] = {}
            for key, inner in item.items():
                if room[0] <= 0:
                    kept["..."] = f"{len(item) - len(kept)} more keys"
                    break
                kept[str(key)[:ECHO_CHARS]] = shown(inner)
            return kept
        if isinstance(item, (list, tuple)):
            listed: list[Any] = []
            for inner in item:
                if room[0] <= 0:
                    listed.append(f"... {len(item) - len(listed)} more items")
                    break
                listed.append(shown(inner))
            return listed
        return item

    return shown(value)


def _validated(body: bytes) -> tuple[RolloutRequest | None, bytes | None]:
    """The request in ``body``, or the 422 body for JSON that does not validate; ``(None, None)``
    for a body that is not JSON (FastAPI answers that one, as for any size)."""
    try:
        return RolloutRequest.model_validate_json(body), None
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if any(error["type"] == "json_invalid" for error in errors):
            return None, None
        detail = [
            {
                "type": error["type"],
                "loc": ["body", *error["loc"]],
                "msg": error["msg"],
                "input": echoed(error.get("input")),
                **({"ctx": jsonable_encoder(error["ctx"])} if "ctx" in error else {}),
            }
            for error in errors
        ]
        forget_traceback(exc)
    try:
        return None, json.dumps({"detail": detail}, default=str, allow_nan=False).encode()
    except ValueError:  # an input JSON cannot carry (Infinity): the errors without it, as below
        plain = [
            {key: value for key, value in error.items() if key not in ("input", "ctx")} for error in detail
        ]
        return None, json.dumps({"detail": plain}).encode()


def _authorization(request: Request) -> bytes | None:
    """The raw ``Authorization`` header (Starlette decodes headers as latin-1, which this undoes)."""
    value = request.headers.get("authorization")
    return None if value is None else value.encode("latin-1")


def _is_plain_json(content_type: bytes) -> bool:
    """``application/json`` (parameters ignored)."""
    return content_type.partition(b";")[0].strip().lower() == b"application/json"


def _route_path(scope: Scope) -> str:
    """The path the router matches: without the ``root_path`` of an app mounted under a prefix."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


class InitGate:
    """The one gate of ``POST /v1/rollout/init`` (module docstring); other requests pass untouched."""

    fast = True  # False sends valid bodies on to FastAPI too (the benchmark's plain version)

    def __init__(
        self,
        app: ASGIApp,
        endpoint: Callable[[RolloutRequest], Awaitable[Response]],
        api_key: str | None,
        max_body_bytes: int,
        max_concurrent_inits: int,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.endpoint = endpoint
        self.api_key = api_key.encode() if api_key is not None else None
        self.limit = max_body_bytes
        self.admitted = max_concurrent_inits
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or _route_path(scope) != INIT_PATH:
            await self.app(scope, receive, send)
            return
        if self.metrics is not None:
            send = _counting(send, self.metrics)
        async with self._slots_of(asyncio.get_running_loop()):
            await self._init(scope, receive, send)

    def _slots_of(self, loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
        # A semaphore belongs to the loop it first waited on; an app served again gets a fresh one.
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self.admitted), loop
        return self._slots

    async def _init(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value)  # the first of repeated headers, as Starlette reads them
        if self.api_key is not None and not authorized(headers.get(b"authorization"), self.api_key):
            client = scope.get("client")
            logger.warning(
                "init rejected: missing or invalid API key (from %s)", client[0] if client else "?"
            )
            await JSONResponse(UNAUTHORIZED, 401)(scope, receive, send)
            return
        token = tracing.attach_remote(headers.get(b"traceparent"), headers.get(b"tracestate"))
        try:
            await self._accept(scope, receive, send, headers)
        finally:
            tracing.detach(token)

    async def _accept(self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]) -> None:
        body = await bounded_body(scope, receive, send, headers.get(b"content-length"), self.limit)
        if body is None:
            return
        content_type = headers.get(b"content-type")
        if self.fast and (content_type is None or _is_plain_json(content_type)):
            rollout: RolloutRequest | None = None
            if len(body) > OFF_LOOP_BYTES:
                rollout, unprocessable = await asyncio.to_thread(_validated, body)
                if unprocessable is not None:
                    await Response(unprocessable, 422, media_type="application/json")(scope, receive, send)
                    return
            else:
                with contextlib.suppress(ValidationError):  # FastAPI's own 422 below, with its error list
                    rollout = RolloutRequest.model_validate_json(body)
            if rollout is not None:
                await (await self.endpoint(rollout))(scope, receive, send)
                return
        if content_type is None:
            scope = {**scope, "headers": [*scope["headers"], _JSON]}
        await self.app(scope, replay(body, receive), send)


async def bounded_body(
    scope: Scope, receive: Receive, send: Send, content_length: bytes | None, limit: int
) -> bytes | None:
    """The request's whole body when it is at most ``limit`` bytes; otherwise 413 is answered as soon
    as the declared length or what was read is past it, and ``None`` returned (also when the client
    went away before the body ended: nobody to answer)."""
    if content_length is None or not content_length.isdigit() or int(content_length) <= limit:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                break
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    detail = f"request body exceeds the limit of {limit} bytes (ServerConfig(max_request_bytes=...))"
    await JSONResponse({"detail": detail}, 413)(scope, receive, send)
    return None


def _counting(send: Send, metrics: ServerMetrics) -> Send:
    """``send`` that counts the answer's status code."""

    async def counted(message: Message) -> None:
        if message["type"] == "http.response.start":
            metrics.init_answered(message["status"])
        await send(message)

    return counted


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives the already read ``body`` first, then what ``receive`` gives."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


def health_payload(
    state: AppState, executor: RolloutExecutor, worker: WorkerSlot | None = None
) -> dict[str, Any]:
    """The ``/health`` body: the four protocol keys first, then capacity figures; under
    ``serve --workers`` also which worker answered and the figures of all of them. ``degraded`` while
    the shared state cannot be reached (every init answers 503 then), with the reason."""
    status = "draining" if not executor.accepting else "degraded" if executor.shared_error else "healthy"
    payload: dict[str, Any] = {
        "status": status,
        "agent_loop": state.agent_loop_name,
        "active_rollouts": state.active_count,
        "completed_rollouts": state.completed_count,
        "running_rollouts": state.running,
        "queued_rollouts": state.queued_count,
        "max_concurrent_rollouts": state.max_concurrent,
        "max_queued_rollouts": executor.queue_limit,
        "pending_deliveries": executor.pending_deliveries,
        "abandoned_rollouts": executor.abandoned,
    }
    if status == "degraded":
        payload["degraded_reason"] = executor.shared_error
    if worker is not None:
        worker.publish(state, executor)
        payload["worker"] = {"index": worker.index, "pid": os.getpid()}
        payload["workers"] = worker.totals()
    return payload


async def _unprocessable(request: Request, exc: Exception) -> Response:
    """FastAPI's 422 body with each input :func:`echoed`; without the echoed input when that cannot be
    JSON (a body of ``Infinity``), where FastAPI's own handler fails and the client gets a 500 and a
    dropped connection."""
    raw = exc.errors() if isinstance(exc, RequestValidationError) else []
    errors = jsonable_encoder([{**e, "input": echoed(e["input"])} if "input" in e else e for e in raw])
    try:
        return JSONResponse({"detail": errors}, 422)
    except ValueError:
        plain = [
            {key: value for key, value in error.items() if key not in ("input", "ctx")} for error in errors
        ]
        return JSONResponse({"detail": plain}, 422)


def add_metrics_route(app: FastAPI, metrics: ServerMetrics) -> None:
    """``GET /metrics``: the Prometheus exposition of ``metrics`` (the gauges refreshed first)."""
    from osmosis_ai.observe.metrics import content_type

    media_type = content_type()

    async def scrape() -> Response:
        metrics.refresh()
        return Response(await asyncio.to_thread(metrics.render), media_type=media_type)

    app.add_api_route("/metrics", scrape, methods=["GET"])


def add_routes(
    app: FastAPI,
    state: AppState,
    executor: RolloutExecutor,
    config: ServerConfig,
    metrics: ServerMetrics | None = None,
    worker: WorkerSlot | None = None,
) -> None:
    """Add the endpoints to ``app`` (``/metrics`` with ``metrics``; the figures of every worker with
    ``worker``), and :class:`InitGate` in front of them."""
    api_key = config.api_key

    async def init(request: RolloutRequest) -> Response:
        try:
            body = await executor.start(request)
        except _InitRefused as refused:
            return JSONResponse(
                {"detail": refused.message}, refused.status, headers={"Retry-After": str(refused.retry_after)}
            )
        except Exception as exc:
            logger.exception(
                "init of rollout %r failed: get_tools raised or returned invalid tool schemas",
                request.rollout_id,
            )
            forget_traceback(exc)
            return PlainTextResponse("Internal Server Error", 500)
        return Response(body, 202, media_type="application/json")

    def healthy() -> Response:
        payload = health_payload(state, executor, worker)
        # A load balancer reads the status code: a degraded process takes no traffic until it recovers.
        return JSONResponse(payload, 503 if payload["status"] == "degraded" else 200)

    async def health() -> Response:
        return healthy()

    async def platform_health(request: Request) -> Response:
        if api_key is None:
            return JSONResponse({"detail": "Not found"}, 404)
        if not authorized(_authorization(request), api_key):
            return JSONResponse(UNAUTHORIZED, 401)
        return healthy()

    app.add_api_route(INIT_PATH, init, methods=["POST"], status_code=202)
    app.add_exception_handler(RequestValidationError, _unprocessable)
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/platform/health", platform_health, methods=["GET"])
    if metrics is not None:
        add_metrics_route(app, metrics)
    app.add_middleware(
        InitGate,
        endpoint=init,
        api_key=api_key,
        max_body_bytes=config.max_request_bytes,
        max_concurrent_inits=config.max_concurrent_inits,
        metrics=metrics,
    )
