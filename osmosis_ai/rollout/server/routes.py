"""The RolloutServer's HTTP endpoints: ``POST /v1/rollout/init``, ``GET /health``, ``GET /platform/health``.

Init is a plain ASGI endpoint rather than a FastAPI route because it is the hot path: it checks the
API key from the raw headers before reading the body (so unauthenticated callers learn nothing and
cost nothing — 0.2 validated first, D31), reads a size-bounded body, validates it with one
``model_validate_json`` call and answers with prebuilt bytes. Error bodies keep 0.2's shapes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from osmosis_ai.rollout.server.api_key import authorized
from osmosis_ai.rollout.server.executor import InitRefused
from osmosis_ai.rollout.server.responses import (
    BodyTooLarge,
    Receive,
    Scope,
    Send,
    header,
    read_body,
    send_bytes,
    send_json,
    validation_errors,
)

if TYPE_CHECKING:
    from osmosis_ai.rollout.server.executor import RolloutExecutor
    from osmosis_ai.rollout.server.state import AppState

logger = logging.getLogger(__name__)

UNAUTHORIZED_BODY = b'{"detail":"Invalid or missing API key"}'
NOT_FOUND_BODY = b'{"detail":"Not found"}'


class InitEndpoint:
    """ASGI app for ``POST /v1/rollout/init`` (mounted as a Starlette route inside the FastAPI app)."""

    def __init__(self, executor: RolloutExecutor, api_key: str | None, max_body_bytes: int) -> None:
        from osmosis_ai.rollout.core.schemas import RolloutRequest

        self._executor = executor
        self._api_key = api_key.encode() if api_key is not None else None
        self._max_body_bytes = max_body_bytes
        self._validate = RolloutRequest.model_validate_json

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._api_key is not None and not authorized(header(scope, b"authorization"), self._api_key):
            client = scope.get("client")
            logger.warning(
                "init rejected: missing or invalid API key (from %s)", client[0] if client else "?"
            )
            await send_bytes(send, 401, UNAUTHORIZED_BODY)
            return
        try:
            body = await read_body(scope, receive, self._max_body_bytes)
        except BodyTooLarge:
            await send_json(
                send,
                413,
                {
                    "detail": f"request body exceeds the limit of {self._max_body_bytes} bytes "
                    "(create_app(max_request_bytes=...))"
                },
            )
            return
        try:
            request = self._validate(body)
        except ValidationError as exc:
            await send_json(send, 422, {"detail": validation_errors(body, exc)})
            return
        try:
            payload = await self._executor.start(request)
        except InitRefused as exc:
            await self._reject(send, exc)
            return
        except Exception:
            logger.exception(
                "init of rollout %r failed in get_tools or tool serialization", request.rollout_id
            )
            await send_bytes(send, 500, b"Internal Server Error", b"text/plain; charset=utf-8")
            return
        await send_bytes(send, 202, payload)

    @staticmethod
    async def _reject(send: Send, exc: InitRefused) -> None:
        await send_json(
            send, exc.status, {"detail": exc.message}, [(b"retry-after", str(exc.retry_after).encode())]
        )


def health_payload(state: AppState, executor: RolloutExecutor) -> dict[str, Any]:
    """The ``/health`` body: 0.2's four keys first, then capacity figures (additive)."""
    return {
        "status": "healthy" if executor.accepting else "draining",
        "agent_loop": state.agent_loop_name,
        "active_rollouts": state.active_count,
        "completed_rollouts": state.completed_count,
        "running_rollouts": state.running,
        "queued_rollouts": state.queued_count,
        "max_concurrent_rollouts": state.max_concurrent,
        "max_queued_rollouts": executor.queue_limit,
    }


class HealthEndpoint:
    """ASGI app for ``GET /health`` (no auth) and ``GET /platform/health`` (auth; 404 without a key)."""

    def __init__(
        self, state: AppState, executor: RolloutExecutor, api_key: str | None, *, platform: bool
    ) -> None:
        self._state = state
        self._executor = executor
        self._api_key = api_key.encode() if api_key is not None else None
        self._platform = platform

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._platform:
            if self._api_key is None:
                await send_bytes(send, 404, NOT_FOUND_BODY)
                return
            if not authorized(header(scope, b"authorization"), self._api_key):
                await send_bytes(send, 401, UNAUTHORIZED_BODY)
                return
        await send_json(send, 200, health_payload(self._state, self._executor))
