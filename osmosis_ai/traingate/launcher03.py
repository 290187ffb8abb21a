"""Driving a 0.3 rollout server: ``POST /rollout``, then ``GET /rollout/{id}/result`` under the lease.

A 0.3 server has no callbacks: the controller submits the rollout (202 with a polling lease) and
long-polls its result, each poll renewing the lease, until it is ``success``, ``failure`` or
``cancelled``. Submitting goes through :class:`~osmosis_ai.traingate.launcher.RolloutLauncher`'s one
retry loop (a full server's 429 with ``Retry-After`` is asked again for as long as the rollout's
deadline allows: the rollout id makes the submit safe to repeat, and a 409 for an id this run never
submitted cannot happen). A refusal is :class:`~osmosis_ai.traingate.launcher.InitRejected`, a
refused poll :class:`ResultRefused`, silence :class:`~osmosis_ai.traingate.launcher.ServerUnreachable`.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

from pydantic import ValidationError

from osmosis_ai._http import NoAnswer, Response, is_retryable_status, retrying, shared_pool
from osmosis_ai.rollout.types.protocol import (
    POLLING_LEASE_HEADER,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutResultResponse,
)
from osmosis_ai.traingate.errors import TrainGateError
from osmosis_ai.traingate.launcher import BODY_EXCERPT, InitRejected, RolloutLauncher, ServerUnreachable

logger = logging.getLogger(__name__)

POLL_SLACK_S = 10.0  # how much longer than the server's long poll a poll request may take
CANCEL_WAIT_S = (
    5.0  # a cancel is sent once the rollout's deadline has passed: it must not hold the outcome long
)


class ResultRefused(TrainGateError):
    """The 0.3 server refused a result poll (an unknown id's 404, a bad lease's 403, ...)."""

    def __init__(self, url: str, status: int, body: str) -> None:
        excerpt = body if len(body) <= BODY_EXCERPT else body[:BODY_EXCERPT] + "...(truncated)"
        super().__init__(f"result poll refused by {url}: HTTP {status}: {excerpt.strip() or '(empty body)'}")
        self.status = status


class Launcher03(RolloutLauncher):
    """Submits 0.3 rollouts to one server and polls their results (see the module docstring)."""

    async def submit(self, request: RolloutInitRequest, *, deadline: float) -> RolloutInitResponse:
        """POST ``/rollout``; the server's 202 answer, asked again while it is full and ``deadline``
        (``time.monotonic()``) allows."""
        url = f"{self.server_url}/rollout"
        response = await self._post(url, request.model_dump_json(exclude_none=True).encode(), deadline)
        text = response.body.decode("utf-8", "replace")
        if response.status not in (200, 202):
            raise InitRejected(url, response.status, text)
        try:
            return RolloutInitResponse.model_validate_json(text)
        except ValidationError as exc:
            raise InitRejected(url, response.status, f"unreadable submit response ({exc}): {text}") from exc

    async def result(self, rollout_id: str, lease: str, *, wait: float) -> RolloutResultResponse:
        """One long poll of the result (the server holds it up to ``wait`` seconds); an in-flight
        status when it held no answer. No answer, or a 5xx, is asked again under the retry policy."""
        url = f"{self.server_url}/rollout/{quote(rollout_id, safe='')}/result"
        headers = {**self._headers, POLLING_LEASE_HEADER: lease}
        pool = shared_pool(self._max_connections)

        async def attempt() -> Response:
            try:
                answer = await pool.request(
                    "GET",
                    url,
                    headers=headers,
                    timeout=wait + POLL_SLACK_S,
                    connect_timeout=self._connect_timeout,
                )
            except NoAnswer as exc:
                raise ServerUnreachable.at(self.server_url, exc) from exc
            if is_retryable_status(answer.status):
                raise ResultRefused(url, answer.status, answer.body.decode("utf-8", "replace"))
            return answer

        answer = await retrying(
            attempt, self.retry, retryable=lambda exc: isinstance(exc, (ServerUnreachable, ResultRefused))
        )
        text = answer.body.decode("utf-8", "replace")
        if answer.status != 200:
            raise ResultRefused(url, answer.status, text)
        try:
            return RolloutResultResponse.model_validate_json(text)
        except ValidationError as exc:
            raise ResultRefused(url, answer.status, f"unreadable result ({exc}): {text}") from exc

    async def cancel(self, rollout_id: str) -> None:
        """Ask the server to stop ``rollout_id`` (the run stopped waiting for it); best effort."""
        body = json.dumps({"ids": [rollout_id]}).encode()
        try:
            await shared_pool(self._max_connections).request(
                "POST", f"{self.server_url}/rollout/cancel", body=body, headers=self._headers,
                timeout=CANCEL_WAIT_S, connect_timeout=CANCEL_WAIT_S,
            )  # fmt: skip
        except NoAnswer as exc:
            logger.info("could not cancel rollout %s at %s: %s", rollout_id, self.server_url, exc)
