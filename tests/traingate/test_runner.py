"""Rollouts driven by the real TrainGate over loopback: agents served by the real ``create_app``
in-process, and the infrastructure failures and refused calls a run reports."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from examples.calculator.agent import agent_loop as calculator_agent
from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult, create_app
from osmosis_ai.runs.bench import run_bench
from osmosis_ai.runs.rollouts import RunConfig, run_rollouts
from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.local_server import serve_agent_loop_locally, serve_asgi
from osmosis_ai.traingate.policy.scripted import ScriptedPolicy
from osmosis_ai.traingate.report import summarize
from tests.support.rollout_server import Callback, StandInRolloutServer
from tests.support.sockets import free_port

ROW = {"system_prompt": "calc", "user_prompt": "What is 20 / 8?", "ground_truth": "2.5"}


async def test_calculator_with_scripted_policy_completes_with_token_data(
    calculator_rows: list[dict[str, Any]],
) -> None:
    async with serve_agent_loop_locally(calculator_agent) as url, TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, calculator_rows, RunConfig(url, n=2, concurrency=4, timeout=10))
    assert len(sessions) == 2 * len(calculator_rows)
    assert {s.status for s in sessions} == {"COMPLETED"}
    assert [s.reward for s in sessions] == [1.0] * len(sessions)
    for session in sessions:
        record = json.loads(json.dumps(session.to_record()))
        assert record["append_only_violations"] == [] and record["rejected_calls"] == []
        assert record["finish_reason"] == "stop"
        assert record["metrics"]["num_llm_calls"] == 2 and record["metrics"]["num_tool_calls"] == 1
        first, second = record["turns"]
        for turn in (first, second):
            assert turn["token_ids"] and all(isinstance(t, int) for t in turn["token_ids"])
            assert turn["logprobs"] == [0.0] * len(turn["token_ids"])
            assert turn["usage"]["completion_tokens"] == len(turn["token_ids"])
        # Token-in-token-out: the next prompt is the previous prompt + the generated ids + what the agent appended.
        prefix = first["prompt_token_ids"] + first["token_ids"]
        assert second["prompt_token_ids"][: len(prefix)] == prefix
        assert record["final_messages"][-1]["content"].startswith("The answer is #### ")
        assert record["final_messages"][:3] == [*session.messages, first["message"]]
    assert summarize(sessions, 1.0).all_terminal


class RewritingAgent(RolloutAgentLoop):
    """Edits an earlier message between turns: the bug the append-only check exists for."""

    name = "rewriter"

    def __init__(self, how: str) -> None:
        self.how = how

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:  # type: ignore[override]
        from examples.calculator.tools import TOOLS

        return TOOLS

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        messages = list(ctx.request.messages)
        first = await ctx.chat(messages)
        call = first.message["tool_calls"][0]
        if self.how == "edit_user":
            messages[1] = {**messages[1], "content": messages[1]["content"] + " Think step by step."}
            messages.append(first.message)
        else:  # rebuild the assistant message without its tool calls
            messages.append({"role": "assistant", "content": first.message.get("content")})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "2.5"})
        final = await ctx.chat(messages)
        return ctx.complete([*messages, final.message], reward=1.0)


@pytest.mark.parametrize(
    ("how", "index", "detail"),
    [("edit_user", 1, "'content' changed"), ("drop_tool_calls", 2, "'tool_calls' removed")],
)
async def test_history_rewriting_agent_is_caught(how: str, index: int, detail: str) -> None:
    async with serve_agent_loop_locally(RewritingAgent(how)) as url, TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [ROW], RunConfig(url, timeout=10))
    session = sessions[0]
    assert session.status == "COMPLETED"
    assert [(v.turn, v.index, v.kind, v.detail) for v in session.violations] == [
        (1, index, "modified", detail)
    ]
    violation = session.to_record()["append_only_violations"][0]
    assert violation["expected"] != violation["actual"]
    assert summarize(sessions, 1.0).rollouts_with_violations == 1


async def test_server_api_key_is_sent_on_init() -> None:
    app = create_app(calculator_agent, api_key="server-secret")
    async with serve_asgi(app) as url, TrainGate(ScriptedPolicy()) as gate:
        good = await run_rollouts(gate, [ROW], RunConfig(url, server_api_key="server-secret", timeout=10))
        bad = await run_rollouts(
            gate, [ROW], RunConfig(url, server_api_key="wrong", timeout=10, run_id="bad")
        )
    assert good[0].status == "COMPLETED" and good[0].reward == 1.0
    assert bad[0].status == "INIT_FAILED" and "HTTP 401" in (bad[0].error_message or "")


async def test_bench_against_the_calculator() -> None:
    async with serve_agent_loop_locally(calculator_agent) as url:
        summary = await run_bench(url, rollouts=40, concurrency=8, tool_turns=2)
    assert summary.statuses == {"COMPLETED": 40}
    assert summary.violations == 0 and summary.mean_turns == 3
    assert summary.rollouts_per_s > 0 and summary.latency_ms["p99"] is not None


async def test_trainer_side_reward_errors_are_recorded_not_fatal() -> None:
    def broken(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
        raise KeyError("score")

    async with serve_agent_loop_locally(calculator_agent) as url, TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [ROW], RunConfig(url, timeout=10, reward_fn=broken))
    session = sessions[0]
    assert session.status == "COMPLETED" and session.reward is None and session.agent_reward == 1.0
    assert session.reward_error == "KeyError: 'score'"
    assert summarize(sessions, 1.0).reward_errors == 1


class HangingAgent(RolloutAgentLoop):
    name = "hanging"

    def get_tools(self, request: RolloutRequest) -> list[dict[str, Any]]:  # type: ignore[override]
        return []

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


async def test_hanging_agent_times_out_and_the_local_server_stops_at_once() -> None:
    # The agent sleeps an hour: the test finishing at all shows the local server did not wait for it.
    async with TrainGate(ScriptedPolicy()) as gate:
        async with serve_agent_loop_locally(HangingAgent()) as url:
            sessions = await run_rollouts(gate, [ROW], RunConfig(url, timeout=0.3))
        # The server ended the abandoned rollout while shutting down; the gateway heard it but kept TIMEOUT.
        assert sessions[0].status == "TIMEOUT"
        assert sessions[0].errors == ["completion (ERROR) arrived after the rollout ended (TIMEOUT)"]


async def test_long_prompts_are_tokenized_off_the_loop_with_the_same_ids() -> None:
    from osmosis_ai.models.rendering import render_prompt

    row = {**ROW, "system_prompt": "You are a calculator. " * 2000}  # ~44 KB: tokenized in a worker thread
    async with serve_agent_loop_locally(calculator_agent) as url, TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [row], RunConfig(url, timeout=10))
    session = sessions[0]
    assert session.status == "COMPLETED" and session.reward == 1.0
    first = session.turns[0]
    assert first.prompt_token_ids == list(render_prompt(session.messages).encode("utf-8"))
    assert len(first.prompt_token_ids) > 44_000


# -- infrastructure failures and refused calls -----------------------------------------------------


SUM_ROW = {"system_prompt": "calc", "user_prompt": "What is 2 + 3?", "ground_truth": "5"}


async def test_server_that_never_calls_back_times_out() -> None:
    async with StandInRolloutServer(mode="silent") as server, TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [SUM_ROW], RunConfig(server.url, timeout=0.3, n=2))
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
        sessions = await run_rollouts(gate, [SUM_ROW], RunConfig(server.url, timeout=5))
    assert sessions[0].status == "INIT_FAILED"
    assert "HTTP 500" in (sessions[0].error_message or "")
    assert "get_tools exploded" in (sessions[0].error_message or "")
    assert server.inits[0]["api_key"] == sessions[0].callback_key


async def test_unreachable_server_is_reported() -> None:
    port = free_port()  # nothing listens there
    async with TrainGate(ScriptedPolicy()) as gate:
        sessions = await run_rollouts(gate, [SUM_ROW], RunConfig(f"http://127.0.0.1:{port}", timeout=5))
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
        sessions = await run_rollouts(gate, [SUM_ROW], RunConfig(server.url, timeout=5))
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
        sessions = await run_rollouts(gate, [SUM_ROW], RunConfig(server.url, timeout=5))
    assert [status for status, _ in answers] == [500, 500]
    assert answers[0][1] == {"detail": "the policy crashed: RuntimeError: boom"}
    assert sessions[0].status == "ERROR" and sessions[0].error_message == "llm failed"
    assert sessions[0].errors == ["turn 0: policy crashed: RuntimeError: boom"] * 2


async def test_skipped_rollouts_are_not_run_and_the_rest_are_admitted_by_their_sequence_number(
    calculator_rows: list[dict[str, Any]],
) -> None:
    from osmosis_ai.runs.engine import Pipeline, run_items
    from osmosis_ai.runs.executors.traingate import TrainGateExecutor
    from osmosis_ai.runs.items import WorkItem, work_items
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.scorer import Scorer
    from osmosis_ai.traingate.launcher import RolloutLauncher

    done = {(0, 0), (0, 1), (1, 1), (3, 0)}  # what a journal already has
    admitted: list[int] = []
    ran: list[tuple[int, int]] = []

    async def admit(item: WorkItem) -> None:
        admitted.append(item.row_index * 2 + item.sample_index)

    def finished(result: Result) -> None:
        ran.append(result.item.key)

    rows = calculator_rows[:4]
    async with (
        serve_agent_loop_locally(calculator_agent) as url,
        TrainGate(ScriptedPolicy()) as gate,
        RolloutLauncher(url) as launcher,
    ):
        report = await run_items(
            work_items(enumerate(rows), n=2, skip=lambda item: item.key in done),
            Pipeline(TrainGateExecutor(gate, launcher, timeout=10), Scorer()),
            concurrency=2,
            on_result=finished,
            before_start=admit,
        )
    wanted = [(r, s) for r in range(4) for s in range(2) if (r, s) not in done]
    assert report.started == len(wanted) and sorted(ran) == wanted
    assert admitted == [r * 2 + s for r, s in wanted]
