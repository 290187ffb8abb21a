"""Starting rollouts: the init's retries, over a real socket to a stand-in rollout server."""

from __future__ import annotations

import time

import pytest

from osmosis_ai._http import RetryPolicy
from osmosis_ai.rollout.core.schemas import RolloutRequest
from osmosis_ai.traingate.launcher import InitRejected, RolloutLauncher
from tests.support.rollout_server import StandInRolloutServer

QUICK = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02, jitter=False)


def _request(rollout_id: str) -> RolloutRequest:
    return RolloutRequest(
        rollout_id=rollout_id,
        server_url="http://127.0.0.1:1",
        messages=[{"role": "user", "content": "add 2 and 3"}],
        completion_params={},
        idempotency_key=rollout_id,
    )


async def test_a_busy_server_is_asked_again_until_the_deadline_not_only_the_policys_attempts() -> None:
    async with StandInRolloutServer(mode="silent", busy=5) as server:
        launcher = RolloutLauncher(server.url, retry=QUICK)
        answer = await launcher.init(_request("r1"), deadline=time.monotonic() + 30)
    assert answer.rollout_id == "r1" and len(server.inits) == 6  # five 503s, then the 202


async def test_without_a_deadline_a_busy_server_gets_the_policys_attempts() -> None:
    async with StandInRolloutServer(mode="silent", busy=5) as server:
        with pytest.raises(InitRejected, match="HTTP 503"):
            await RolloutLauncher(server.url, retry=QUICK).init(_request("r2"))
    assert len(server.inits) == 3


async def test_a_deadline_too_close_for_the_next_wait_ends_the_retries() -> None:
    slow = RetryPolicy(max_attempts=3, base_delay=5.0, max_delay=5.0, jitter=False)
    async with StandInRolloutServer(mode="silent", busy=5) as server:
        with pytest.raises(InitRejected, match="HTTP 503"):
            await RolloutLauncher(server.url, retry=slow).init(_request("r3"), deadline=time.monotonic() + 1)
    assert len(server.inits) == 1
