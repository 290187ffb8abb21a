"""The background rollout over real sockets: the terminal-callback matrix, retries, deadline, back-pressure,
graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from typing import Any

import httpx
import pytest

from examples.calculator.agent import agent_loop as calculator
from osmosis_ai.rollout import RolloutContext, RolloutResult
from osmosis_ai.rollout.server.executor import SHUTDOWN_MESSAGE
from tests.support.server import ADD_TOOL, ScriptedAgent, chat_then_fail, fast_settings, hang, init_body
from tests.support.sockets import free_port
from tests.support.trainer import FINAL_MESSAGE, Reply, TrainerStandIn, completion
from tests.support.waiting import wait_until


def _start(http: httpx.Client, url: str, rollout_id: str, trainer: TrainerStandIn, **extra: Any) -> None:
    response = http.post(f"{url}/v1/rollout/init", json=init_body(rollout_id, trainer.url, **extra))
    assert response.status_code == 202, response.text


def test_calculator_rollout_reports_completed_with_reward_and_metrics(serve, http, trainer: TrainerStandIn):
    trainer.tool_turns = 1
    server = serve(calculator)
    _start(http, server.url, "calc-1", trainer)
    done = trainer.wait_completed("calc-1")
    assert done["status"] == "COMPLETED"
    assert done["reward"] == 1.0
    assert done["finish_reason"] == "stop"
    assert "error_message" not in done
    roles = [m["role"] for m in done["final_messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert done["final_messages"][2]["content"] == "3"
    metrics = done["metrics"]
    assert (metrics["num_llm_calls"], metrics["num_tool_calls"]) == (2, 1)
    assert (metrics["prompt_tokens"], metrics["response_tokens"]) == (10 + 30, 16)
    assert metrics["total_latency_ms"] >= metrics["llm_latency_ms"] > 0
    assert trainer.chat_requests[0].json["temperature"] == 0.5  # completion_params were passed


def test_agent_exception_reports_error_with_partial_conversation_and_metrics(serve, http, trainer):
    server = serve(ScriptedAgent(chat_then_fail))
    _start(http, server.url, "fail-1", trainer)
    done = trainer.wait_completed("fail-1")
    assert done["status"] == "ERROR"
    assert done["error_message"] == "KeyError"  # str(KeyError()) is empty: never send an empty message
    assert done["finish_reason"] == "error"
    assert [m["role"] for m in done["final_messages"]] == [
        "user",
        "assistant",
    ]  # the partial conversation is kept
    metrics = done["metrics"]
    assert (metrics["num_llm_calls"], metrics["num_tool_calls"], metrics["tool_latency_ms"]) == (1, 1, 2.0)
    assert metrics["total_latency_ms"] > 0
    wait_until(
        lambda: http.get(f"{server.url}/health").json()["active_rollouts"] == 0
    )  # nothing more to send
    assert len(trainer.completed_requests) == 1


async def _returns(value: Any) -> Any:
    return value


@pytest.mark.parametrize(
    ("behaviour", "message_part"),
    [
        (lambda ctx: _returns(RolloutResult("DONE", [], "stop")), "'DONE'"),
        (lambda ctx: _returns(None), "returned NoneType"),
        (lambda ctx: _returns(RolloutResult("ERROR", [], "error")), "without a message"),
        (
            lambda ctx: _returns(ctx.error("custom failure", [{"role": "user", "content": "x"}])),
            "custom failure",
        ),
    ],
)
def test_invalid_or_error_results_report_one_error(serve, http, trainer, behaviour: Any, message_part: str):
    server = serve(ScriptedAgent(behaviour))
    _start(http, server.url, "odd", trainer)
    done = trainer.wait_completed("odd")
    assert done["status"] == "ERROR"
    assert message_part in done["error_message"]
    wait_until(
        lambda: http.get(f"{server.url}/health").json()["active_rollouts"] == 0
    )  # nothing more to send
    assert len(trainer.completed_requests) == 1


@pytest.mark.parametrize(
    ("reward", "refusal"),
    [
        (True, "got True of type bool; a bool is not a score: return 1.0 or 0.0"),
        ("0.5", "got '0.5' of type str"),
        (float("nan"), "got nan of type float"),
    ],
)
def test_a_reward_the_score_rule_refuses_is_sent_as_its_reward_error_never_a_number(
    serve, http, trainer, caplog, reward: object, refusal: str
):
    messages = [{"role": "user", "content": "x"}]
    server = serve(ScriptedAgent(lambda ctx: _returns(ctx.complete(messages, reward=reward))))
    with caplog.at_level(logging.ERROR, logger="osmosis_ai.rollout.server.executor"):
        _start(http, server.url, "bad-reward", trainer)
        done = trainer.wait_completed("bad-reward")
    message = f"the agent's reward must be a finite real number (a float, or an int), {refusal}"
    assert (done["status"], done["final_messages"]) == ("COMPLETED", messages)  # the rollout stands
    assert "reward" not in done and "error_message" not in done
    assert done["extra_fields"] == {"reward_error": message}
    assert f"rollout bad-reward: {message}" in caplog.text  # the server's own log says it too


def test_rejected_completed_delivery_is_not_retried_nor_re_reported_as_error(serve, http, trainer, caplog):
    trainer.queue_completed(Reply(status=400))
    server = serve(ScriptedAgent())
    with caplog.at_level(logging.ERROR, logger="osmosis_ai.rollout.server.executor"):
        _start(http, server.url, "d2", trainer)
        wait_until(lambda: http.get(f"{server.url}/health").json()["pending_deliveries"] == 0)
        wait_until(lambda: "rejected the terminal callback" in caplog.text)
    assert [r.json["status"] for r in trainer.completed_requests] == ["COMPLETED"]


def test_completed_delivery_outlasts_server_errors_until_acknowledged(serve, http, trainer):
    trainer.queue_completed(Reply(status=500), Reply(status=502), Reply(status=503), Reply(status=429))
    server = serve(ScriptedAgent())
    _start(http, server.url, "d3", trainer)
    wait_until(lambda: "d3" in trainer.completed, timeout=15)
    assert [r.status for r in trainer.completed_requests] == [500, 502, 503, 429, 200]
    assert [r.json["status"] for r in trainer.completed_requests] == ["COMPLETED"] * 5
    wait_until(lambda: http.get(f"{server.url}/health").json()["pending_deliveries"] == 0)


def test_chat_retries_5xx_408_429_and_timeouts_then_completes(serve, http, trainer, caplog):
    caplog.set_level(logging.WARNING, logger="osmosis_ai.rollout.client")
    trainer.queue_chat(
        Reply(status=503),
        Reply(status=429, headers={"Retry-After": "0"}),
        Reply(status=408),
    )
    settings = fast_settings()
    settings.client.max_retries = 4
    server = serve(ScriptedAgent(), settings=settings)
    _start(http, server.url, "retry", trainer)
    done = trainer.wait_completed("retry")
    assert done["status"] == "COMPLETED"
    assert [r.status for r in trainer.chat_requests] == [503, 429, 408, 200]
    waits = [float(w) for w in re.findall(r"retrying in (\d+\.\d+)s", caplog.text)]
    assert len(waits) == 3 and 0.05 <= waits[0] <= 0.1  # back-off: base 0.1 s, jittered down to half


def test_chat_timeout_is_retried(serve, http, trainer):
    trainer.queue_chat(Reply(delay=1.5, body=completion(FINAL_MESSAGE, 1)))
    settings = fast_settings()
    settings.client.timeout_seconds = 1.0
    server = serve(ScriptedAgent(), settings=settings)
    _start(http, server.url, "slow-chat", trainer)
    assert trainer.wait_completed("slow-chat", timeout=6)["status"] == "COMPLETED"
    assert len(trainer.chat_requests) == 2


def test_chat_4xx_fails_the_rollout_without_retry(serve, http, trainer):
    trainer.queue_chat(Reply(status=422, body={"detail": "bad messages"}))
    server = serve(ScriptedAgent())
    _start(http, server.url, "c4xx", trainer)
    done = trainer.wait_completed("c4xx")
    assert done["status"] == "ERROR"
    assert "422" in done["error_message"]
    assert len(trainer.chat_requests) == 1


def test_refused_connection_is_retried_and_the_server_recovers(monkeypatch, serve, http, trainer, caplog):
    from osmosis_ai.rollout.server import app as app_module

    # The refused callback is still retried when the server stops after the test: its shutdown budget
    # for callbacks, not 5 s (monkeypatch is set up before serve, so it is undone after the stop).
    monkeypatch.setattr(app_module, "SHUTDOWN_CALLBACK_TIMEOUT_SECONDS", 0.5)
    dead_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    server = serve(ScriptedAgent())
    with caplog.at_level(logging.WARNING):
        response = http.post(f"{server.url}/v1/rollout/init", json=init_body("refused", dead_url))
        assert response.status_code == 202
        wait_until(lambda: http.get(f"{server.url}/health").json()["active_rollouts"] == 0)
        wait_until(lambda: "v1/rollout/completed failed" in caplog.text)  # the ERROR is retried too
    # chat: 1 + max_retries(3) attempts, the first to this endpoint logged, the next ones counted
    assert caplog.text.count("v1/chat/completions failed (") == 1
    assert http.get(f"{server.url}/health").json()["pending_deliveries"] == 1  # kept, still retried
    _start(http, server.url, "after-refused", trainer)
    assert trainer.wait_completed("after-refused")["status"] == "COMPLETED"


def test_deadline_ends_a_hung_agent_with_error(serve, http, trainer):
    server = serve(ScriptedAgent(hang), settings=fast_settings(request_timeout_seconds=0.3))
    _start(http, server.url, "hung", trainer)
    done = trainer.wait_completed("hung")  # the agent itself would wait an hour
    assert done["status"] == "ERROR"
    assert "deadline of 0.3 s" in done["error_message"]
    assert [m["role"] for m in done["final_messages"]] == ["user", "assistant"]
    wait_until(lambda: http.get(f"{server.url}/health").json()["active_rollouts"] == 0)


def test_a_zero_deadline_means_no_deadline(serve, http, trainer):
    async def slow(ctx: RolloutContext) -> RolloutResult:
        await asyncio.sleep(0.3)
        return ctx.complete(list(ctx.request.messages))

    server = serve(ScriptedAgent(slow), settings=fast_settings(request_timeout_seconds=0))
    _start(http, server.url, "no-deadline", trainer)
    assert trainer.wait_completed("no-deadline")["status"] == "COMPLETED"


def test_hung_get_tools_is_bounded_by_the_deadline(serve, http, trainer):
    release = threading.Event()

    def stuck(request: Any) -> list[Any]:
        release.wait(5)
        return []

    server = serve(ScriptedAgent(tools=stuck), settings=fast_settings(request_timeout_seconds=0.3))
    response = http.post(f"{server.url}/v1/rollout/init", json=init_body("stuck", trainer.url))
    release.set()
    assert response.status_code == 500
    assert http.get(f"{server.url}/health").json()["status"] == "healthy"  # the loop was never blocked


def test_queue_limit_answers_429_with_retry_after(serve, http, trainer):
    server = serve(
        ScriptedAgent(hang),
        max_concurrent=1,
        settings=fast_settings(max_queued_rollouts=1, shutdown_grace_seconds=0),
    )
    _start(http, server.url, "bp-1", trainer)
    _start(http, server.url, "bp-2", trainer)
    rejected = http.post(f"{server.url}/v1/rollout/init", json=init_body("bp-3", trainer.url))
    assert rejected.status_code == 429
    assert rejected.headers["retry-after"] == "1"
    assert "capacity" in rejected.json()["detail"]
    health = http.get(f"{server.url}/health").json()
    assert (health["running_rollouts"], health["queued_rollouts"], health["active_rollouts"]) == (1, 1, 2)
    duplicate = http.post(f"{server.url}/v1/rollout/init", json=init_body("bp-2", trainer.url))
    assert duplicate.status_code == 202  # duplicates of accepted rollouts are still answered


def test_unlimited_queue_by_default_accepts_beyond_concurrency(serve, http, trainer):
    server = serve(ScriptedAgent(hang), max_concurrent=1, settings=fast_settings(shutdown_grace_seconds=0))
    for i in range(5):
        _start(http, server.url, f"q-{i}", trainer)
    health = http.get(f"{server.url}/health").json()
    assert (health["running_rollouts"], health["queued_rollouts"]) == (1, 4)


def test_graceful_shutdown_drains_then_reports_error_for_the_rest(serve, http, trainer):
    events: list[str] = []

    async def on_shutdown() -> None:
        events.append(f"on_shutdown with {len(trainer.completed)} completions")

    async def quick_or_hang(ctx: RolloutContext) -> RolloutResult:
        result = await ctx.chat(list(ctx.request.messages))
        if ctx.request.metadata.get("hang"):
            await asyncio.sleep(3600)
        return ctx.complete([*ctx.request.messages, result.message])

    server = serve(
        ScriptedAgent(quick_or_hang),
        max_concurrent=2,
        settings=fast_settings(shutdown_grace_seconds=1.0),
        on_shutdown=on_shutdown,
    )
    trainer.queue_chat(
        Reply(delay=0.2, body=completion(FINAL_MESSAGE, 1))
    )  # the quick rollout is still in its chat call at shutdown
    _start(http, server.url, "quick", trainer)
    _start(http, server.url, "hang-running", trainer, metadata={"hang": True})
    _start(http, server.url, "hang-queued", trainer, metadata={"hang": True})
    wait_until(lambda: len(trainer.chat_requests) >= 2)
    server.stop()
    assert not server.running  # the hung agents (an hour each) did not hold the shutdown up
    assert trainer.completed["quick"]["status"] == "COMPLETED"  # finished within the grace period
    for rollout_id in ("hang-running", "hang-queued"):
        done = trainer.completed[rollout_id]
        assert done["status"] == "ERROR"
        assert done["error_message"] == SHUTDOWN_MESSAGE
    assert [m["role"] for m in trainer.completed["hang-running"]["final_messages"]] == ["user", "assistant"]
    assert events == ["on_shutdown with 3 completions"]  # on_shutdown runs after the drain


def test_while_draining_init_gets_503_and_health_says_draining(serve, http, trainer):
    server = serve(ScriptedAgent(hang), settings=fast_settings(shutdown_grace_seconds=1.0))
    _start(http, server.url, "drain-1", trainer)
    wait_until(lambda: len(trainer.chat_requests) == 1)
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    wait_until(lambda: http.get(f"{server.url}/health").json()["status"] == "draining")
    refused = http.post(f"{server.url}/v1/rollout/init", json=init_body("drain-2", trainer.url))
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    duplicate = http.post(f"{server.url}/v1/rollout/init", json=init_body("drain-1", trainer.url))
    assert duplicate.status_code == 202  # accepted rollouts are still answered
    stopper.join(10)
    assert trainer.completed["drain-1"]["error_message"] == SHUTDOWN_MESSAGE
    assert "drain-2" not in trainer.completed


def test_init_whose_get_tools_outlasts_the_start_of_shutdown_is_refused_not_orphaned(serve, http, trainer):
    in_get_tools, release = threading.Event(), threading.Event()

    def tools(request: Any) -> list[Any]:
        if request.rollout_id == "late":
            in_get_tools.set()
            release.wait(5)
        return []

    server = serve(ScriptedAgent(hang, tools=tools), settings=fast_settings(shutdown_grace_seconds=1.0))
    _start(http, server.url, "running", trainer)
    wait_until(lambda: len(trainer.chat_requests) == 1)
    answers: list[httpx.Response] = []

    def post(rollout_id: str) -> None:  # the second one is a duplicate waiting for the first's get_tools
        with httpx.Client(timeout=10) as client:
            answers.append(client.post(f"{server.url}/v1/rollout/init", json=init_body("late", trainer.url)))

    posters = [threading.Thread(target=post, args=("late",)) for _ in range(2)]
    posters[0].start()
    assert in_get_tools.wait(5)
    posters[1].start()
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    wait_until(lambda: http.get(f"{server.url}/health").json()["status"] == "draining")
    release.set()  # get_tools returns after the drain took its snapshot of running rollouts
    for thread in (*posters, stopper):
        thread.join(10)
    assert [(r.status_code, r.headers.get("retry-after")) for r in answers] == [(503, "1"), (503, "1")]
    assert "shutting down" in answers[0].json()["detail"]
    assert trainer.completed["running"]["error_message"] == SHUTDOWN_MESSAGE
    assert [r.json["rollout_id"] for r in trainer.completed_requests] == ["running"]  # nothing for "late"


def test_shutdown_error_callbacks_are_bounded_by_the_callback_budget(serve, http, trainer, monkeypatch):
    from osmosis_ai.rollout.server import app as app_module

    monkeypatch.setattr(app_module, "SHUTDOWN_CALLBACK_TIMEOUT_SECONDS", 0.5)
    trainer.queue_completed(Reply(delay=30))  # TrainGate takes the ERROR callback but never answers
    server = serve(ScriptedAgent(hang), settings=fast_settings(shutdown_grace_seconds=0))
    _start(http, server.url, "slow-ack", trainer)
    wait_until(lambda: len(trainer.chat_requests) == 1)
    server.stop()
    assert not server.running
    # Within the client's own timeout (2 s) and retries a second attempt would follow; the shutdown
    # budget (0.5 s) ends the first one instead.
    assert [r.json["status"] for r in trainer.completed_requests] == ["ERROR"]


def test_a_result_built_wrongly_by_a_defect_is_replaced_by_exactly_one_error(serve, http, trainer, caplog):
    class BrokenReward(float):
        def __float__(self) -> float:  # not the TypeError/ValueError of a bad value: a bug
            raise RuntimeError("broken")

    async def broken(ctx: RolloutContext) -> RolloutResult:
        return ctx.complete([{"role": "assistant", "content": "4"}], reward=BrokenReward())  # type: ignore[arg-type]

    server = serve(ScriptedAgent(broken))
    with caplog.at_level(logging.ERROR, logger="osmosis_ai.rollout.server.executor"):
        _start(http, server.url, "defect", trainer)
        done = trainer.wait_completed("defect")
        wait_until(lambda: http.get(f"{server.url}/health").json()["active_rollouts"] == 0)
    assert done["status"] == "ERROR"
    assert done["error_message"] == "the RolloutServer could not build the COMPLETED callback: RuntimeError"
    assert [m["role"] for m in done["final_messages"]] == ["user"]  # the conversation as last seen
    assert len(trainer.completed_requests) == 1
    assert "the COMPLETED callback could not be built" in caplog.text
    assert "delivering" not in caplog.text


def test_an_agent_that_outlives_its_deadline_with_a_result_gets_it_delivered(serve, http, trainer):
    async def ignore_the_deadline(ctx: RolloutContext) -> RolloutResult:
        with contextlib.suppress(asyncio.CancelledError):  # the agent swallows the cancel
            await asyncio.sleep(5)
        await ctx.chat(list(ctx.request.messages))
        return ctx.complete([], reward=0.5)

    server = serve(ScriptedAgent(ignore_the_deadline), settings=fast_settings(request_timeout_seconds=0.2))
    _start(http, server.url, "late-result", trainer)
    done = trainer.wait_completed("late-result")
    assert (done["status"], done["reward"]) == ("COMPLETED", 0.5)


def test_the_shared_pool_has_a_connection_for_every_running_rollout(serve, http, trainer):
    # max_connections=2 sizes the one process-wide pool; the server must still let its 4 running
    # rollouts talk to TrainGate at once rather than take turns.
    settings = fast_settings(max_concurrent_rollouts=4)
    settings = settings.model_copy(
        update={"client": settings.client.model_copy(update={"max_connections": 2})}
    )
    gate = threading.Event()  # TrainGate answers no chat until all four are in
    trainer.queue_chat(*[Reply(gate=gate) for _ in range(4)])
    server = serve(ScriptedAgent(), settings=settings)
    try:
        for i in range(4):
            _start(http, server.url, f"pool-{i}", trainer)
        wait_until(lambda: len(trainer.chat_requests) == 4)  # a pool of 2 would hold two back
        assert trainer.in_flight.peak == 4
    finally:
        gate.set()
    for i in range(4):
        assert trainer.wait_completed(f"pool-{i}")["status"] == "COMPLETED"


def test_init_bodies_follow_the_agents_tools_as_they_change(serve, http, trainer):
    """The encoded tools are reused only while get_tools keeps returning an equal list."""
    current: list[Any] = [ADD_TOOL]
    server = serve(ScriptedAgent(tools=lambda request: current))

    def init(rollout_id: str) -> Any:
        response = http.post(f"{server.url}/v1/rollout/init", json=init_body(rollout_id, trainer.url))
        assert response.status_code == 202, response.text
        return response.json()

    first = init("r-ü-1")
    assert first["rollout_id"] == "r-ü-1"
    assert [tool["function"]["name"] for tool in first["tools"]] == ["add"]
    assert init("r-2")["tools"] == first["tools"]
    current = []
    assert init("r-3") == {"rollout_id": "r-3", "tools": []}
    current = [ADD_TOOL, {**ADD_TOOL, "function": {**ADD_TOOL["function"], "name": "plus"}}]
    assert [tool["function"]["name"] for tool in init("r-4")["tools"]] == ["add", "plus"]
    for rollout_id in ("r-ü-1", "r-2", "r-3", "r-4"):
        trainer.wait_completed(rollout_id)
