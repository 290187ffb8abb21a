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

import os
from typing import TYPE_CHECKING, Annotated

from fastapi import FastAPI, Header
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from osmosis_ai.observe import tracing
from osmosis_ai.rollout.server.api_key import authorized
from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.executor import STATE_RETRY_AFTER_SECONDS, _InitRefused
from osmosis_ai.rollout.server.results03 import BadLease, DuplicateRollout, UnknownRollout
from osmosis_ai.rollout.server.routes import (
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


class SubmitLimit:
    """Answers 413 to a ``POST /rollout`` body above ``limit`` bytes, before it is parsed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or _route_path(scope) != "/rollout":
            await self.app(scope, receive, send)
            return
        length = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        body = await bounded_body(scope, receive, send, length, self.limit)
        if body is not None:
            await self.app(scope, replay(body, receive), send)


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
        # the rollout's task is made in the trace the controller names, as a 0.2 init's is
        trace = tracing.attach_remote(_latin1(traceparent), _latin1(tracestate))
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
    app.add_middleware(SubmitLimit, limit=config.max_request_bytes)
    if config.api_key is not None:  # added last: the outermost, so it runs before anything is read
        app.add_middleware(BearerGate, api_key=config.api_key)
