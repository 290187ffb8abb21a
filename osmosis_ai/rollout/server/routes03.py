"""The 0.3 wire's endpoints over the one executor (the 0.2 wire's are in :mod:`.routes`).

``POST /rollout`` (202 with a polling lease; 409 duplicate id; 429 at the queue limit and 503 while
draining or while the shared state is unreachable, all with ``Retry-After``),
``GET /rollout/{id}/result`` (long poll under the lease: 404 unknown id, 403 wrong lease, 503 when
the rollout is another process's and the shared state is unreachable), ``POST /rollout/cancel`` (exactly one of ``ids``, ``prefix``,
``all``; with a shared state it reaches the rollouts of every process sharing it; 503 while the
state is unreachable), ``GET /health``, and ``GET /metrics`` when the app has metrics (the 0.2
wire's route and figures; each submit's answer is counted as an init's). With an API key every request must carry ``Authorization: Bearer <key>``
(401 otherwise), checked before anything else is read. A submit body above ``max_request_bytes`` gets
413 unread; bad bodies get 422 with bounded echoes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

from fastapi import FastAPI, Header
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from osmosis_ai.observe import tracing
from osmosis_ai.rollout.server.api_key import authorized
from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.executor import STATE_RETRY_AFTER_SECONDS, _InitRefused
from osmosis_ai.rollout.server.results03 import BadLease, DuplicateRollout, UnknownRollout
from osmosis_ai.rollout.server.routes import (
    _is_plain_json,
    _route_path,
    _unprocessable,
    add_metrics_route,
    bounded_body,
    replay,
)
from osmosis_ai.rollout.server.run03 import Runner03
from osmosis_ai.rollout.types.protocol import (
    POLLING_LEASE_HEADER,
    CancelRolloutsRequest,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutResultResponse,
)
from osmosis_ai.rollout.types.status import RolloutStatus

if TYPE_CHECKING:
    from osmosis_ai.rollout.server.config import ServerConfig
    from osmosis_ai.rollout.server.workers import WorkerSlot

UNAUTHORIZED = {"detail": "unauthorized"}
INSTANCE_ENV = "_OSMOSIS_ROLLOUT_INSTANCE_ID"


class BearerGate:
    """Answers 401 to any HTTP request without ``Authorization: Bearer <api_key>``."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.api_key = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
            if not authorized(header, self.api_key):
                await JSONResponse(UNAUTHORIZED, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Gate03:
    """The hot routes below FastAPI: a ``POST /rollout`` body above ``limit`` bytes gets 413 before it
    is parsed; a JSON body that validates in one ``RolloutInitRequest.model_validate_json`` call, and
    a ``GET /rollout/{id}/result`` carrying a lease, go straight to their endpoints, skipping
    Starlette's routing, middleware and request wrappers (each rollout makes one submit and a poll
    per status). Anything else (another content type, a body that does not validate, no lease) goes
    on to FastAPI with the body replayed, so every 422 is FastAPI's own."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        submit: Callable[[RolloutInitRequest, bytes | None, bytes | None], Awaitable[Response]],
        result: Callable[[str, str], Awaitable[Response]],
    ) -> None:
        self.app = app
        self.limit = limit
        self.submit = submit
        self.result = result

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method = scope["method"]
            if method == "GET":
                rollout_id = _polled_id(_route_path(scope))
                if rollout_id is not None:
                    lease = _header(scope, _LEASE)
                    if lease:
                        await (await self.result(rollout_id, lease.decode("latin-1")))(scope, receive, send)
                        return
            elif method == "POST" and _route_path(scope) == "/rollout":
                await self._submit(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _submit(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value)  # the first of repeated headers, as Starlette reads them
        body = await bounded_body(scope, receive, send, headers.get(b"content-length"), self.limit)
        if body is None:
            return
        content_type = headers.get(b"content-type")
        if content_type is not None and _is_plain_json(content_type):
            request: RolloutInitRequest | None = None
            with contextlib.suppress(ValidationError):  # FastAPI's own 422 below, with its error list
                request = RolloutInitRequest.model_validate_json(body)
            if request is not None:
                response = await self.submit(request, headers.get(b"traceparent"), headers.get(b"tracestate"))
                await response(scope, receive, send)
                return
        await self.app(scope, replay(body, receive), send)


_LEASE = POLLING_LEASE_HEADER.lower().encode()


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The first ``name`` header of the request, as Starlette reads a repeated one."""
    return next((value for key, value in scope["headers"] if key == name), None)


def _polled_id(path: str) -> str | None:
    """The id in a ``/rollout/{id}/result`` path (one segment, as the route matches it), else ``None``."""
    if not (path.startswith("/rollout/") and path.endswith("/result")):
        return None
    rollout_id = path[9:-7]
    return rollout_id if rollout_id and "/" not in rollout_id else None


def _latin1(header: str | None) -> bytes | None:
    return None if header is None else header.encode("latin-1", "replace")


def _state_unavailable(exc: SharedStateUnavailable) -> Response:
    return JSONResponse(
        {"detail": f"{exc}; retry later"}, 503, headers={"Retry-After": str(STATE_RETRY_AFTER_SECONDS)}
    )


def _result_body(response: RolloutResultResponse) -> bytes:
    """The result's JSON; a sample's ``trajectory_messages`` only when ``wire_result`` kept them (a
    client reading none takes a copy of ``messages``, as 0.3's sample does)."""
    if response.sample is not None and response.sample.trajectory_messages is not None:
        return response.model_dump_json().encode()
    return response.model_dump_json(exclude={"sample": {"trajectory_messages"}}).encode()


def add_routes03(
    app: FastAPI, runner: Runner03, config: ServerConfig, process_id: str, worker: WorkerSlot | None = None
) -> None:
    """Add the 0.3 endpoints to ``app``, the body limit (``config.max_request_bytes``) and, when
    ``config.api_key`` is set, the bearer check in front of everything; with ``worker`` (one of the
    processes of ``osmosis serve --workers N``), ``/health`` also says which worker answered and
    adds up the figures of all of them, as the 0.2 wire's does."""
    results = runner.results
    executor = runner.executor
    state = executor.state
    instance_id = os.environ.get(INSTANCE_ENV) or process_id

    async def submit(
        request: RolloutInitRequest,
        traceparent: Annotated[str | None, Header()] = None,
        tracestate: Annotated[str | None, Header()] = None,
    ) -> Response:
        return await submitted(request, _latin1(traceparent), _latin1(tracestate))

    async def submitted(
        request: RolloutInitRequest, traceparent: bytes | None, tracestate: bytes | None
    ) -> Response:
        # the rollout's task is made in the trace the controller names, as a 0.2 init's is
        trace = tracing.attach_remote(traceparent, tracestate)
        try:
            response = await admitted(request)
        finally:
            tracing.detach(trace)
        if executor.metrics is not None:
            executor.metrics.init_answered(response.status_code)
        return response

    async def admitted(request: RolloutInitRequest) -> Response:
        try:
            token = await runner.admit(request)
        except _InitRefused as refused:
            return JSONResponse(
                {"detail": refused.message}, refused.status, headers={"Retry-After": str(refused.retry_after)}
            )
        except DuplicateRollout:
            return JSONResponse({"detail": f"rollout_id {request.rollout_id!r} is already registered"}, 409)
        except SharedStateUnavailable as exc:
            return _state_unavailable(exc)
        admission = RolloutInitResponse(
            rollout_id=request.rollout_id,
            status=RolloutStatus.QUEUED,
            polling_lease_token=token,
            result_wait_timeout_sec=results.wait_timeout,
            polling_lease_timeout_sec=results.lease_timeout,
        )
        return Response(admission.model_dump_json(), 202, media_type="application/json")

    async def result(
        rollout_id: str, lease: Annotated[str, Header(alias=POLLING_LEASE_HEADER, min_length=1)]
    ) -> Response:
        return await polled(rollout_id, lease)

    async def polled(rollout_id: str, lease: str) -> Response:
        try:
            response = await results.wait(rollout_id, lease)
        except UnknownRollout:
            return JSONResponse({"detail": f"unknown rollout_id {rollout_id!r}"}, 404)
        except BadLease:
            return JSONResponse({"detail": "invalid polling lease"}, 403)
        except SharedStateUnavailable as exc:
            return _state_unavailable(exc)
        return Response(_result_body(response), media_type="application/json")

    async def cancel(request: CancelRolloutsRequest) -> Response:
        selectors = (request.ids is not None) + (request.prefix is not None) + request.all
        if selectors != 1:
            return JSONResponse({"detail": "give exactly one selector: ids, prefix or all"}, 422)
        try:
            dispositions = await results.cancel(ids=request.ids, prefix=request.prefix, all=request.all)
        except SharedStateUnavailable as exc:
            return _state_unavailable(exc)
        return JSONResponse({"dispositions": dispositions})

    async def health() -> Response:
        payload = {
            "status": "ok",
            "concurrency": {
                "max_concurrent": state.max_concurrent,
                "queued": state.queued_count,
                "running": state.running,
            },
            "instance_id": instance_id,
            "process_id": process_id,
            "lifecycle": {
                "accepting_rollouts": executor.accepting,
                "active_rollouts": state.active_count,
            },
        }
        if worker is not None:
            worker.publish(state, executor)
            payload["worker"] = {"index": worker.index, "pid": os.getpid()}
            payload["workers"] = worker.totals()
        return JSONResponse(payload)

    app.add_api_route("/rollout", submit, methods=["POST"], status_code=202)
    app.add_api_route("/rollout/cancel", cancel, methods=["POST"])
    app.add_api_route("/rollout/{rollout_id}/result", result, methods=["GET"])
    app.add_api_route("/health", health, methods=["GET"])
    if executor.metrics is not None:
        add_metrics_route(app, executor.metrics)
    app.add_exception_handler(RequestValidationError, _unprocessable)
    app.add_middleware(Gate03, limit=config.max_request_bytes, submit=submitted, result=polled)
    if config.api_key is not None:  # added last: the outermost, so it runs before anything is read
        app.add_middleware(BearerGate, api_key=config.api_key)
