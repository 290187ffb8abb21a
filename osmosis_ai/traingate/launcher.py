"""Starting rollouts: ``POST /v1/rollout/init`` to a rollout server through the SDK's shared HTTP pool.

Outcomes the caller must tell apart are typed: :class:`InitRejected` (the server answered, but not
with 200/202 — status and body kept for the report) and :class:`ServerUnreachable` (no answer at
all). Both are infrastructure failures, not agent errors. A retryable answer (a full queue's 429, a
draining server's 503...) or no answer is asked again by the seam's one retry loop
(:func:`~osmosis_ai._http.retrying`), honouring ``Retry-After``; that is safe because the init
carries the rollout id as its idempotency key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sys
import time
from typing import Any

from osmosis_ai._http import (
    NoAnswer,
    Response,
    RetryPolicy,
    holding_shared_pools,
    is_retryable_status,
    parse_retry_after,
    retrying,
    shared_pool,
)
from osmosis_ai.observe import tracing
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

    @classmethod
    def at(cls, server_url: str, exc: Exception) -> ServerUnreachable:
        """The error for ``server_url`` when a request to it got no answer (``exc``)."""
        return cls(f"cannot reach the rollout server at {server_url} (is it running?): {exc}")


class ServerKeyRefused(TrainGateError):
    """The rollout server refused the server API key sent (or the lack of one): HTTP 401."""


DEFAULT_RETRY = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=5.0, max_retry_after=30.0)


def speaks_03(health: dict[str, Any]) -> bool:
    """Whether a ``/health`` answer is a 0.3 server's: 0.3 reports its ``process_id`` and ``lifecycle``
    (a 0.3 controller refuses a server without them), 0.2 neither."""
    return "process_id" in health and isinstance(health.get("lifecycle"), dict)


class RolloutLauncher:
    """Sends init requests to one rollout server (an async context manager, kept for its callers).

    Connections come from the event loop's shared pool of ``max_connections``; ``retry`` says how
    often a retryable answer or a missing answer is asked again.
    """

    def __init__(
        self,
        server_url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 10.0,
        request_timeout: float = 60.0,
        max_connections: int = 100,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.server_url = server_url.rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._max_connections = max_connections
        self.retry = retry
        self._hold: contextlib.AbstractAsyncContextManager[None] | None = None

    async def __aenter__(self) -> RolloutLauncher:
        # Held, so a rollout server stopping in the same loop does not close them under our requests.
        self._hold = holding_shared_pools()
        await self._hold.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        hold, self._hold = self._hold, None
        if hold is not None:
            await hold.__aexit__(None, None, None)

    async def check(self, *, timeout: float = 10.0) -> dict[str, Any]:
        """One look at the server before any rollout starts, so a wrong URL or key is one error, not
        a failed rollout per row; its ``/health`` answer (``{}`` if not a JSON object), which tells a
        0.3 server from a 0.2 one (:func:`speaks_03`).

        ``GET /health`` must answer 200 (:class:`ServerUnreachable` when nothing answers,
        :class:`InitRejected` for another status); a server refusing it without a key (0.3 guards
        every path) is asked again with the key. Then ``GET /platform/health`` with the key must not
        answer 401 (:class:`ServerKeyRefused`; 404 means the server checks no key). Each request may
        take ``timeout`` seconds."""
        health = await self._get("/health", {}, timeout)
        if health.status == 401 and "Authorization" in self._headers:
            health = await self._get("/health", self._headers, timeout)
        if health.status != 200 and health.status != 401:
            raise InitRejected(
                f"{self.server_url}/health", health.status, health.body.decode("utf-8", "replace")
            )
        answer = (
            health if health.status == 401 else await self._get("/platform/health", self._headers, timeout)
        )
        if answer.status == 401:
            sent = (
                "the server API key sent" if "Authorization" in self._headers else "a request without a key"
            )
            raise ServerKeyRefused(f"the rollout server at {self.server_url} refused {sent} (HTTP 401)")
        try:
            body = json.loads(health.body)
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    async def _get(self, path: str, headers: dict[str, str], timeout: float) -> Response:
        try:
            return await shared_pool(self._max_connections).request(
                "GET", f"{self.server_url}{path}", headers=headers, timeout=timeout, connect_timeout=timeout
            )
        except NoAnswer as exc:
            raise ServerUnreachable.at(self.server_url, exc) from exc

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

    async def init(self, request: RolloutRequest, *, deadline: float | None = None) -> InitResponse:
        """POST the init; return the server's InitResponse or raise InitRejected/ServerUnreachable.

        With a ``deadline`` (``time.monotonic()``), an answer that says when to come back (a 429 or
        503 with ``Retry-After``) is asked again for as long as the deadline allows, not only the
        policy's few attempts: a server waiting out its shared state's outage gets the time the
        rollout has. Other failures (no answer, a 500) still get the policy's attempts only.
        """
        url = f"{self.server_url}/v1/rollout/init"
        body = request.model_dump_json(exclude_none=True).encode()
        response = await self._post(url, body, deadline)
        text = response.body.decode("utf-8", "replace")
        if response.status not in (200, 202):
            raise InitRejected(url, response.status, text)
        try:
            return InitResponse.model_validate(json.loads(text))
        except ValueError as exc:
            raise InitRejected(url, response.status, f"unreadable init response ({exc}): {text}") from exc

    async def _post(self, url: str, body: bytes, deadline: float | None) -> Response:
        """The answer to the init: the first one that is not retryable, or the last one."""
        pool = shared_pool(self._max_connections)
        policy = self.retry if deadline is None else dataclasses.replace(self.retry, max_attempts=sys.maxsize)
        failures = 0  # the answers that count against the policy's attempts
        headers = dict(self._headers)
        tracing.inject(headers)  # the server's rollout span continues this run's trace

        async def attempt() -> Response:
            try:
                response = await pool.request(
                    "POST",
                    url,
                    body=body,
                    headers=headers,
                    timeout=self._request_timeout,
                    connect_timeout=self._connect_timeout,
                )
            except NoAnswer as exc:
                raise ServerUnreachable.at(self.server_url, exc) from exc
            if is_retryable_status(response.status):
                raise _RetryableAnswer(response)
            return response

        def log(number: int, exc: Exception, wait: float) -> None:
            reason = str(exc.__cause__) if isinstance(exc, ServerUnreachable) else str(exc)
            logger.info("init %s attempt %d failed (%s); retrying in %.2fs", url, number, reason, wait)

        def retryable(exc: Exception) -> bool:
            nonlocal failures
            if isinstance(exc, _RetryableAnswer) and exc.retry_after is not None and deadline is not None:
                return True  # the server said when to come back: the deadline decides
            failures += 1
            return isinstance(exc, (ServerUnreachable, _RetryableAnswer)) and self.retry.should_retry(
                failures
            )

        def give_up(wait: float) -> bool:
            return deadline is not None and time.monotonic() + wait >= deadline

        try:
            return await retrying(
                attempt,
                policy,
                retryable=retryable,
                retry_after=lambda exc: exc.retry_after if isinstance(exc, _RetryableAnswer) else None,
                give_up=give_up,
                on_retry=log,
            )
        except _RetryableAnswer as exc:
            return exc.response


class _RetryableAnswer(Exception):
    """An answer worth asking again (a full queue's 429, a draining server's 503)."""

    def __init__(self, response: Response) -> None:
        super().__init__(f"HTTP {response.status}")
        self.response = response
        self.retry_after = parse_retry_after(response.retry_after)
