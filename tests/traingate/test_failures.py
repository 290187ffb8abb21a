"""Infrastructure failures and refused calls, over real loopback sockets."""

from __future__ import annotations

from typing import Any

import aiohttp

from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.policy.scripted import ScriptedPolicy
from osmosis_ai.traingate.report import summarize
from osmosis_ai.traingate.runner import RunConfig, run_rollouts
from tests.support.rollout_server import Callback, StandInRolloutServer
from tests.support.sockets import free_port

ROW = {"system_prompt": "calc", "user_prompt": "What is 2 + 3?", "ground_truth": "5"}


async def test_server_that_never_calls_back_times_out() -> None:
    async with StandInRolloutServer(mode="silent") as server, TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [ROW], RunConfig(server.url, timeout=0.3, n=2))
    assert [s.status for s in sessions] == ["TIMEOUT", "TIMEOUT"]
    assert "no /v1/rollout/completed callback within 0.3s" in (sessions[0].error_message or "")
    summary = summarize(sessions, 1.0)
    assert not summary.all_terminal
    assert summary.infra_failures and "2 x no /v1/rollout/completed" in summary.infra_failures[0]


async def test_init_answered_500_is_reported_with_status_and_body() -> None:
    async with (
        StandInRolloutServer(mode="reject", status=500, body="get_tools exploded") as server,
        TrainGate(ScriptedPolicy()) as gate,
    ):
        sessions = await run_rollouts(gate, [ROW], RunConfig(server.url, timeout=5))
    assert sessions[0].status == "INIT_FAILED"
    assert "HTTP 500" in (sessions[0].error_message or "")
    assert "get_tools exploded" in (sessions[0].error_message or "")
    assert server.inits[0]["api_key"] == sessions[0].callback_key


async def test_unreachable_server_is_reported() -> None:
    port = free_port()  # nothing listens there
    async with TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [ROW], RunConfig(f"http://127.0.0.1:{port}", timeout=5))
    assert sessions[0].status == "UNREACHABLE"
    assert f"cannot reach the rollout server at http://127.0.0.1:{port}" in (sessions[0].error_message or "")


async def test_wrong_callback_key_is_rejected_and_recorded() -> None:
    outcomes: dict[str, Any] = {}

    async def rogue_then_honest(init: dict[str, Any], callback: Callback) -> None:
        chat = {"messages": init["messages"], "rollout_id": init["rollout_id"]}
        outcomes["wrong"] = await callback("/v1/chat/completions", chat, key="not-the-key")
        outcomes["missing"] = await callback("/v1/chat/completions", chat, key="")
        outcomes["ok"] = await callback("/v1/chat/completions", chat)
        done = {"rollout_id": init["rollout_id"], "status": "COMPLETED", "final_messages": []}
        outcomes["wrong_done"] = await callback("/v1/rollout/completed", done, key="guess")
        outcomes["done"] = await callback("/v1/rollout/completed", done)

    async with StandInRolloutServer(script=rogue_then_honest) as server, TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [ROW], RunConfig(server.url, timeout=5))
    session = sessions[0]
    assert outcomes["wrong"][0] == 401 and outcomes["missing"][0] == 401 and outcomes["wrong_done"][0] == 401
    assert outcomes["wrong"][1] == {"detail": "Invalid or missing API key"}
    assert outcomes["ok"][0] == 200 and outcomes["done"][0] == 200
    assert [(r.endpoint, r.status, r.reason) for r in session.rejected] == [
        ("/v1/chat/completions", 401, "wrong callback key"),
        ("/v1/chat/completions", 401, "missing callback key"),
        ("/v1/rollout/completed", 401, "wrong callback key"),
    ]
    assert session.status == "COMPLETED" and len(session.turns) == 1
    record = session.to_record()
    assert len(record["rejected_calls"]) == 3
    assert "not-the-key" not in str(record) and session.callback_key not in str(record)


async def test_unknown_rollout_and_bad_body_are_refused() -> None:
    async with TrainGate(ScriptedPolicy()) as gate, aiohttp.ClientSession() as http:
        async with http.post(
            f"{gate.url}/v1/chat/completions", json={"rollout_id": "nope", "messages": []}
        ) as response:
            assert response.status == 404
        async with http.post(f"{gate.url}/v1/chat/completions", json={"messages": "x"}) as response:
            assert response.status == 422
            assert "invalid request body" in (await response.json())["detail"]
        async with http.post(f"{gate.url}/v1/rollout/completed", data=b"{not json") as response:
            assert response.status == 400
    assert [r.status for r in gate.unrouted] == [404]


class CrashingPolicy(ScriptedPolicy):
    async def generate(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], params: dict[str, Any]
    ) -> Any:
        raise RuntimeError("boom")


async def test_a_crashing_policy_costs_one_answer_not_the_gateway() -> None:
    answers: list[tuple[int, Any]] = []

    async def two_calls(init: dict[str, Any], callback: Callback) -> None:
        chat = {"messages": init["messages"], "rollout_id": init["rollout_id"]}
        answers.append(await callback("/v1/chat/completions", chat))
        answers.append(await callback("/v1/chat/completions", chat))
        await callback(
            "/v1/rollout/completed",
            {"rollout_id": init["rollout_id"], "status": "ERROR", "error_message": "llm failed"},
        )

    async with StandInRolloutServer(script=two_calls) as server, TrainGate(CrashingPolicy()) as gate:
        sessions = await run_rollouts(gate, [ROW], RunConfig(server.url, timeout=5))
    assert [status for status, _ in answers] == [500, 500]
    assert answers[0][1] == {"detail": "the policy crashed: RuntimeError: boom"}
    assert sessions[0].status == "ERROR" and sessions[0].error_message == "llm failed"
    assert sessions[0].errors == ["turn 0: policy crashed: RuntimeError: boom"] * 2
