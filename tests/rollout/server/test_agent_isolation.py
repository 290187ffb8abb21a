"""Whatever an agent raises ends only its own rollout, with one ERROR callback, over real sockets."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import httpx
import pytest

from osmosis_ai._usercode import UserCodeRaised, contain, forget_traceback
from osmosis_ai.rollout import RolloutContext, RolloutResult
from tests.support.server import ScriptedAgent, fast_settings, init_body
from tests.support.trainer import TrainerStandIn
from tests.support.waiting import wait_until


class AgentBomb(BaseException):
    """A custom BaseException: slips past every ``except Exception``."""


RAISED: dict[str, BaseException] = {
    "exit": SystemExit(2),
    "interrupt": KeyboardInterrupt(),
    "custom": AgentBomb("boom"),
}


async def _by_rollout_id(ctx: RolloutContext) -> RolloutResult:
    kind = ctx.request.rollout_id.split("-")[0]
    await ctx.chat(list(ctx.request.messages))
    if kind in RAISED:
        raise RAISED[kind]
    return ctx.complete(list(ctx.request.messages), reward=1.0)


def test_system_exit_keyboard_interrupt_and_custom_base_exceptions_end_only_their_rollout(
    serve, http: httpx.Client, trainer: TrainerStandIn
):
    server = serve(ScriptedAgent(_by_rollout_id))
    ids = [f"{kind}-{i}" for i in range(3) for kind in (*RAISED, "ok")]
    for rollout_id in ids:
        assert (
            http.post(f"{server.url}/v1/rollout/init", json=init_body(rollout_id, trainer.url)).status_code
            == 202
        )
    for rollout_id in ids:
        trainer.wait_completed(rollout_id)
    wait_until(lambda: http.get(f"{server.url}/health").json()["pending_deliveries"] == 0)
    assert sorted(r.json["rollout_id"] for r in trainer.completed_requests) == sorted(ids)  # one each
    for rollout_id in ids:
        done = trainer.completed[rollout_id]
        kind = rollout_id.split("-")[0]
        if kind == "ok":
            assert done["status"] == "COMPLETED"
        else:
            assert done["status"] == "ERROR"
            assert done["error_message"].startswith(type(RAISED[kind]).__name__)
            assert [m["role"] for m in done["final_messages"]] == ["user", "assistant"]
    # The server is still up and takes new work.
    assert (
        http.post(f"{server.url}/v1/rollout/init", json=init_body("ok-after", trainer.url)).status_code == 202
    )
    assert trainer.wait_completed("ok-after")["status"] == "COMPLETED"


@pytest.mark.parametrize("raised", list(RAISED.values()), ids=list(RAISED))
def test_get_tools_raising_a_base_exception_fails_only_that_init(serve, http, trainer, raised: BaseException):
    server = serve(ScriptedAgent(tools=raised))
    assert (
        http.post(f"{server.url}/v1/rollout/init", json=init_body("bad-tools", trainer.url)).status_code
        == 500
    )
    assert http.get(f"{server.url}/health").json()["status"] == "healthy"


def test_an_agent_swallowing_cancellation_is_abandoned_after_the_grace_period(serve, http, trainer):
    async def stubborn(ctx: RolloutContext) -> RolloutResult:
        await ctx.chat(list(ctx.request.messages))
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:  # a bare except: in real code
                continue

    settings = fast_settings(request_timeout_seconds=0.3, abandon_grace_seconds=0.3)
    agent = ScriptedAgent()
    server = serve(agent, settings=settings, max_concurrent=1)
    agent.behaviour = stubborn
    http.post(f"{server.url}/v1/rollout/init", json=init_body("stubborn", trainer.url))
    done = trainer.wait_completed("stubborn")
    assert done["status"] == "ERROR"
    assert "ignored cancellation" in done["error_message"]
    assert [m["role"] for m in done["final_messages"]] == ["user", "assistant"]
    assert http.get(f"{server.url}/health").json()["abandoned_rollouts"] == 1
    agent.behaviour = None  # the one slot is free again: the next rollout runs
    http.post(f"{server.url}/v1/rollout/init", json=init_body("next", trainer.url))
    assert trainer.wait_completed("next")["status"] == "COMPLETED"


async def test_contain_turns_base_exceptions_into_an_ordinary_one_and_lets_cancellation_through():
    async def raising() -> None:
        raise SystemExit(3)

    with pytest.raises(UserCodeRaised, match="SystemExit: 3") as caught:
        await asyncio.get_running_loop().create_task(contain(raising))
    assert isinstance(caught.value.original, SystemExit)

    async def sleeping() -> None:
        await asyncio.sleep(10)

    task = asyncio.get_running_loop().create_task(contain(sleeping))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_forgotten_traceback_leaves_nothing_for_the_cyclic_collector():
    def fail() -> None:
        try:
            raise ValueError("x")
        except ValueError as error:
            kept: Any = error  # exception -> traceback -> this frame -> kept -> exception: a cycle
            raise kept from None

    def failures(forget: bool) -> int:
        # With the collector off, every object the loop leaves stays in the youngest generation, so
        # collecting that one alone finds the cycles without walking the whole suite's heap.
        gc.collect(0)
        gc.disable()
        try:
            for _ in range(200):
                try:
                    fail()
                except ValueError as exc:
                    if forget:
                        forget_traceback(exc)
            return gc.collect(0)
        finally:
            gc.enable()

    assert failures(forget=False) >= 200  # the test can fail: without it, frames wait for the collector
    assert failures(forget=True) < 20
