"""The RolloutServer's HTTP endpoints, as FastAPI routes: ``POST /v1/rollout/init``, ``GET /health``,
``GET /platform/health``.

Init checks the API key, then the body size, before the body is read: an unauthenticated caller
learns nothing about the schema and costs the server nothing, and an oversized body is refused
without being buffered. A body without a ``Content-Type`` is read as JSON, the protocol's only body
type (FastAPI versions differ on that). FastAPI reads and validates the body before it runs any
dependency, so these checks wrap the route's handler (:class:`InitRoute`).

Init is the server's hot path, so the common init never reaches the framework: :class:`FastInit`,
called from :class:`InitAdmission`, takes an authorized ``POST`` with a ``Content-Length`` within the
limit and a JSON (or absent) ``Content-Type``, reads the body, validates it with one
``RolloutRequest.model_validate_json`` call and calls the endpoint itself, skipping Starlette's
exception middleware, routing and request wrappers. Every other request goes on to the route as it
came, or with the body already read replayed, so the 401, the 413 before the body is read, 422 with
FastAPI's error list and 400 for a body FastAPI cannot parse all stay FastAPI's own answers. The
``init fast path`` line of ``benchmarks/rollout_server.py`` measures what it buys.

In front of everything, :class:`InitAdmission` lets at most ``max_concurrent_inits`` inits into the
application at once; the rest wait before any framework code runs. An init that waits inside (for
``get_tools`` in its worker thread, for a duplicate's first answer) holds its parsed body and a stack
of framework frames; when thousands arrive in one burst they would all be inside at once. The
``init admission`` line of the benchmark measures the difference.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from osmosis_ai.rollout.core.schemas import RolloutRequest
from osmosis_ai.rollout.server.api_key import authorized
from osmosis_ai.rollout.server.executor import _InitRefused
from osmosis_ai.rollout.server.isolation import forget_traceback

if TYPE_CHECKING:
    from osmosis_ai.rollout.server.config import ServerConfig
    from osmosis_ai.rollout.server.executor import RolloutExecutor
    from osmosis_ai.rollout.server.state import AppState

logger = logging.getLogger(__name__)

INIT_PATH = "/v1/rollout/init"
UNAUTHORIZED = {"detail": "Invalid or missing API key"}


def _authorization(request: Request) -> bytes | None:
    """The raw ``Authorization`` header (Starlette decodes headers as latin-1, which this undoes)."""
    value = request.headers.get("authorization")
    return None if value is None else value.encode("latin-1")


def _is_plain_json(content_type: str | None) -> bool:
    """``Content-Type`` absent or ``application/json`` (parameters ignored), which FastAPI parses as JSON."""
    return content_type is None or content_type.partition(";")[0].strip().lower() == "application/json"


def _too_large(limit: int) -> HTTPException:
    return HTTPException(
        413, f"request body exceeds the limit of {limit} bytes (ServerConfig(max_request_bytes=...))"
    )


def _bounded(receive: Receive, limit: int) -> Receive:
    """``receive`` that raises 413 as soon as the body read so far exceeds ``limit`` bytes."""
    size = 0

    async def bounded() -> Message:
        nonlocal size
        message = await receive()
        size += len(message.get("body", b""))
        if size > limit:
            raise _too_large(limit)
        return message

    return bounded


class InitAdmission:
    """ASGI middleware: at most ``limit`` init requests inside the application at once (module docstring).

    With ``fast_init`` it also answers the inits that need nothing from the framework (module docstring).
    """

    def __init__(self, app: ASGIApp, limit: int, fast_init: FastInit | None = None) -> None:
        self.app = app
        self.limit = limit
        self.fast_init = fast_init
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith(INIT_PATH):
            await self.app(scope, receive, send)
            return
        async with self._slots_of(asyncio.get_running_loop()):
            if self.fast_init is not None:
                unanswered = await self.fast_init(scope, receive, send)
                if unanswered is None:
                    return
                receive = unanswered
            await self.app(scope, receive, send)

    def _slots_of(self, loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
        # A semaphore belongs to the loop it first waited on; an app served again gets a fresh one.
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self.limit), loop
        return self._slots


class FastInit:
    """The init fast path below the framework: an authorized ``POST`` of a declared, allowed length
    and JSON type whose body validates in one ``RolloutRequest.model_validate_json`` goes straight
    to the endpoint. Anything else goes on to :class:`InitRoute` unread, or with the body it read
    replayed, and gets the framework's own answer."""

    enabled = True  # False sends every init through FastAPI (the benchmark's plain version)

    def __init__(
        self, endpoint: Callable[[RolloutRequest], Awaitable[Response]], api_key: str | None, limit: int
    ) -> None:
        self.endpoint = endpoint
        self.api_key = api_key.encode() if api_key is not None else None
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """``None`` once answered; else the ``receive`` the framework reads the request from."""
        if scope["method"] != "POST" or scope["path"] != INIT_PATH:
            return receive
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value)  # the first of repeated headers, as Starlette reads them
        authorization = headers.get(b"authorization")
        length = headers.get(b"content-length")
        content_type = headers.get(b"content-type")
        if self.api_key is not None and not authorized(authorization, self.api_key):
            return receive
        if length is None or not length.isdigit() or int(length) > self.limit:
            return receive
        if not _is_plain_json(None if content_type is None else content_type.decode("latin-1")):
            return receive
        first = await receive()
        if first["type"] != "http.request":  # the client went away: the framework handles it
            return _replaying(first, receive)
        body = first.get("body", b"")
        more = first.get("more_body", False)
        if more:
            chunks = [body]
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return _replaying({**first, "body": b"".join(chunks), "more_body": True}, receive)
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            body = b"".join(chunks)
        try:
            rollout = RolloutRequest.model_validate_json(body)
        except ValidationError:
            return _replaying({"type": "http.request", "body": body, "more_body": False}, receive)
        response = await self.endpoint(rollout)
        await response(scope, receive, send)
        return None


def _replaying(message: Message, receive: Receive) -> Receive:
    """``receive`` that gives ``message`` first, then what ``receive`` gives."""
    pending: list[Message] = [message]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


class InitRoute(APIRoute):
    """The init route: 401 and 413 before the body is read, then FastAPI's own handling (module docstring)."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        api_key: str | None,
        max_body_bytes: int,
        **kwargs: Any,
    ) -> None:
        self.api_key = api_key.encode() if api_key is not None else None
        self.max_body_bytes = max_body_bytes
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        api_key, limit = self.api_key, self.max_body_bytes

        async def guarded(request: Request) -> Response:
            if api_key is not None and not authorized(_authorization(request), api_key):
                client = request.client
                logger.warning(
                    "init rejected: missing or invalid API key (from %s)", client.host if client else "?"
                )
                return JSONResponse(UNAUTHORIZED, 401)
            headers = request.headers
            declared = headers.get("content-length")
            if declared is not None and declared.isdigit():
                if int(declared) > limit:
                    raise _too_large(limit)
                # The HTTP server delivers no more than the declared length: no need to count.
            else:
                request = Request(request.scope, _bounded(request.receive, limit))
            content_type = headers.get("content-type")
            if content_type is None:  # the protocol has one body type: read it as JSON
                scope = request.scope
                scope = {**scope, "headers": [*scope["headers"], (b"content-type", b"application/json")]}
                request = Request(scope, request.receive)
            return await handler(request)

        return guarded


def health_payload(state: AppState, executor: RolloutExecutor) -> dict[str, Any]:
    """The ``/health`` body: the four protocol keys first, then capacity figures."""
    return {
        "status": "healthy" if executor.accepting else "draining",
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


async def _unprocessable(request: Request, exc: Exception) -> Response:
    """FastAPI's 422 body; without the echoed input when that cannot be JSON (a body of ``Infinity``),
    where FastAPI's own handler fails and the client gets a 500 and a dropped connection."""
    errors = jsonable_encoder(exc.errors()) if isinstance(exc, RequestValidationError) else []
    try:
        return JSONResponse({"detail": errors}, 422)
    except ValueError:
        plain = [
            {key: value for key, value in error.items() if key not in ("input", "ctx")} for error in errors
        ]
        return JSONResponse({"detail": plain}, 422)


def add_routes(app: FastAPI, state: AppState, executor: RolloutExecutor, config: ServerConfig) -> None:
    """Add the three endpoints to ``app``, and :class:`InitAdmission` in front of them."""
    api_key, max_body_bytes = config.api_key, config.max_request_bytes

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

    async def health() -> Response:
        return JSONResponse(health_payload(state, executor))

    async def platform_health(request: Request) -> Response:
        if api_key is None:
            return JSONResponse({"detail": "Not found"}, 404)
        if not authorized(_authorization(request), api_key):
            return JSONResponse(UNAUTHORIZED, 401)
        return JSONResponse(health_payload(state, executor))

    app.router.routes.append(
        InitRoute(
            INIT_PATH,
            init,
            methods=["POST"],
            status_code=202,
            api_key=api_key,
            max_body_bytes=max_body_bytes,
        )
    )
    app.add_exception_handler(RequestValidationError, _unprocessable)
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/platform/health", platform_health, methods=["GET"])
    fast_init = FastInit(init, api_key, max_body_bytes) if FastInit.enabled else None
    app.add_middleware(InitAdmission, limit=config.max_concurrent_inits, fast_init=fast_init)
