"""Starting rollouts: ``POST /v1/rollout/init`` to a rollout server through one shared HTTP client.

Outcomes the caller must tell apart are typed: :class:`InitRejected` (the server answered, but not
with 200/202 — status and body kept for the report) and :class:`ServerUnreachable` (no answer at
all). Both are infrastructure failures, not agent errors.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp

from osmosis_ai.rollout.core.schemas import InitResponse, RolloutRequest
from osmosis_ai.traingate.errors import TrainGateError
from osmosis_ai.traingate.session import RolloutSession

logger = logging.getLogger(__name__)

BODY_EXCERPT = 500


class InitRejected(TrainGateError):
    """The rollout server answered the init with an unexpected status (or an unreadable body)."""

    def __init__(self, url: str, status: int, body: str) -> None:
        excerpt = body if len(body) <= BODY_EXCERPT else body[:BODY_EXCERPT] + "...(truncated)"
        super().__init__(f"init rejected by {url}: HTTP {status}: {excerpt.strip() or '(empty body)'}")
        self.status = status
        self.body = body


class ServerUnreachable(TrainGateError):
    """The rollout server could not be reached at all."""


class RolloutLauncher:
    """Sends init requests to one rollout server; use as an async context manager (one pool per run)."""

    def __init__(
        self,
        server_url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 10.0,
        request_timeout: float = 60.0,
        max_connections: int = 100,
    ) -> None:
        self.server_url = server_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=request_timeout, connect=connect_timeout)
        self._max_connections = max_connections
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RolloutLauncher:
        connector = aiohttp.TCPConnector(limit=self._max_connections)
        self._http = aiohttp.ClientSession(connector=connector, timeout=self._timeout, headers=self._headers)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    def build_request(
        self,
        session: RolloutSession,
        gateway_url: str,
        *,
        completion_params: dict[str, Any],
        max_turns: int,
        max_tokens_total: int,
    ) -> RolloutRequest:
        return RolloutRequest(
            rollout_id=session.rollout_id,
            server_url=gateway_url,
            messages=session.messages,
            completion_params=completion_params,
            max_turns=max_turns,
            max_tokens_total=max_tokens_total,
            metadata=session.metadata,
            api_key=session.callback_key,
            idempotency_key=session.rollout_id,
        )

    async def init(self, request: RolloutRequest) -> InitResponse:
        """POST the init; return the server's InitResponse or raise InitRejected/ServerUnreachable."""
        if self._http is None:
            raise RuntimeError("RolloutLauncher used outside 'async with'")
        url = f"{self.server_url}/v1/rollout/init"
        body = request.model_dump(mode="json", exclude_none=True)
        try:
            async with self._http.post(url, json=body) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            raise ServerUnreachable(
                f"cannot reach the rollout server at {self.server_url} (is it running?): "
                f"{type(exc).__name__}: {exc or 'no answer'}"
            ) from exc
        except aiohttp.ClientError as exc:
            raise ServerUnreachable(f"init to {url} failed: {type(exc).__name__}: {exc}") from exc
        if status not in (200, 202):
            raise InitRejected(url, status, text)
        try:
            return InitResponse.model_validate(json.loads(text))
        except ValueError as exc:
            raise InitRejected(url, status, f"unreadable init response ({exc}): {text}") from exc
