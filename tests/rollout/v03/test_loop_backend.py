"""A 0.2 agent loop as a 0.3 backend (``AgentLoopBackend``): the calculator example served over 0.3's
wire, driven by upstream 0.3.8's own ``RolloutClient`` and by ``osmosis rollout run --url``; its
reward (``ctx.complete(reward=...)``) is the rollout's through the grader phase, and its failures
are typed. The policy is the OpenAI-compatible stand-in playing a calculator-using model."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from examples.calculator.agent import agent_loop as calculator
from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult
from osmosis_ai.rollout.bridge import AgentLoopBackend
from osmosis_ai.rollout.types import RolloutStatus
from osmosis_ai.rollout.types.protocol import POLLING_LEASE_HEADER
from tests.rollout.v03.served import without_this_repo
from tests.support import upstream03
from tests.support.cli import CALCULATOR_DATASET, cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.server import RunningServer

DRIVER = Path(__file__).resolve().parent / "upstream_driver.py"
_QUESTION = re.compile(r"what is (\d+) ([-+*]) (\d+)\?", re.IGNORECASE)
_OPERATIONS = {"+": ("add", lambda a, b: a + b), "-": ("subtract", lambda a, b: a - b),
               "*": ("multiply", lambda a, b: a * b)}  # fmt: skip


def _calculator_model(payload: Any) -> Reply:
    """Calls the offered tool for the question, then answers ``#### <tool result>``; offered no tools,
    answers ``#### <the result>`` at once."""
    messages = payload["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(content=f"#### {messages[-1]['content']}")
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    found = _QUESTION.search(question)
    if found is None:
        return Reply(content="?")
    a, operator, b = int(found.group(1)), found.group(2), int(found.group(3))
    name, compute = _OPERATIONS[operator]
    if not payload.get("tools"):
        return Reply(content=f"#### {compute(a, b)}")
    call = {"id": "call_0", "type": "function",
            "function": {"name": name, "arguments": json.dumps({"a": a, "b": b})}}  # fmt: skip
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "policy",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}  # fmt: skip
    return Reply(body=body)


def test_upstreams_client_runs_the_calculator_served_on_0_3s_wire(
    upstream_python: Path, serve03: Callable[..., RunningServer], openai_server: OpenAIServer
) -> None:
    openai_server.handler = _calculator_model
    server = serve03(AgentLoopBackend(calculator), api_key="calc-key-0123456789")
    done = subprocess.run(
        [str(upstream_python), str(DRIVER), "rollouts", server.url, openai_server.url, "calc-key-0123456789"],
        cwd=DRIVER.parent.parent, env=without_this_repo(), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(seen["client_package"]).is_relative_to(upstream03.VENV)  # upstream's client, not ours
    # Labels: even rows the sum (the calculator's reward 1), odd rows "wrong" (0).
    assert seen["results"] == [
        {"id": f"row-{i}", "status": "success", "reward": 1.0 if i % 2 == 0 else 0.0, "error": None}
        for i in range(20)
    ]
    chats = [r for r in openai_server.requests if r.path == "/v1/chat/completions"]
    assert len(chats) == 40  # a tool call and the answer per rollout, the tools in every request
    assert all({t["function"]["name"] for t in r.json["tools"]} >= {"add", "multiply"} for r in chats)
    assert {r.headers["authorization"] for r in chats} == {"Bearer sk-policy"}
    assert not any("rollout_id" in r.json for r in chats)  # OpenAI's body: the URL is the rollout's


def test_rollout_run_drives_the_calculator_served_on_0_3s_wire(
    serve03: Callable[..., RunningServer], tmp_path: Path
) -> None:
    server = serve03(AgentLoopBackend(calculator))
    out = tmp_path / "records.jsonl"
    ran = cli(
        "rollout", "run", "--url", server.url, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
        "-o", str(out), "-q", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr + ran.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(CALCULATOR_DATASET.read_text().splitlines())
    for record in records:  # the scripted policy saw the agent's tools (sent with its chat calls)
        assert (record["outcome"], record["reward"], record["agent_reward"]) == ("completed", 1.0, 1.0), (
            record
        )
        assert [m["role"] for m in record["final_messages"]][-3:] == ["assistant", "tool", "assistant"]
        assert len(record["turns"]) == 2 and record["append_only_violations"] == []


class Misreporting(RolloutAgentLoop):
    """Reports the reward the row's ``mode`` asks for, or an error; calls the model in mode ``chat``."""

    name = "misreporting"

    def get_tools(self, request: RolloutRequest) -> list[Any]:
        return []

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        mode = ctx.request.metadata["mode"]
        if mode == "error":
            return ctx.error("the agent gave up")
        if mode == "chat":
            await ctx.chat(list(ctx.request.messages))
        reward: Any = {"none": None, "bool": True, "half": 0.5}[mode]
        return ctx.complete(list(ctx.request.messages), reward=reward)


def test_the_agents_reward_passes_the_score_rule_in_the_grader_phase(
    serve03: Callable[..., RunningServer], openai_server: OpenAIServer
) -> None:
    openai_server.default = Reply(status=400)  # the chat endpoint refuses every call
    server = serve03(AgentLoopBackend(Misreporting()))
    seen = {}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        modes = (
            ("half", True),
            ("half", False),
            ("none", True),
            ("bool", True),
            ("error", True),
            ("chat", True),
        )
        for mode, grade in modes:
            rollout_id = f"{mode}-{grade}"
            submitted = client.post("/rollout", json={
                "rollout_id": rollout_id, "initial_messages": [{"role": "user", "content": "hi"}],
                "chat_completions_url": openai_server.url, "metadata": {"mode": mode}, "grade": grade,
            })  # fmt: skip
            assert submitted.status_code == 202, submitted.text
            lease = submitted.json()["polling_lease_token"]
            while True:
                polled = client.get(f"/rollout/{rollout_id}/result", headers={POLLING_LEASE_HEADER: lease})
                body = polled.json()
                if body["status"] in ("success", "failure", "cancelled"):
                    break
            seen[rollout_id] = (body["status"], body["err_category"], (body["sample"] or {}).get("reward"))
    assert seen["half-True"] == (RolloutStatus.SUCCESS, None, 0.5)
    assert seen["half-False"] == (RolloutStatus.SUCCESS, None, None)  # not graded: no reward
    assert seen["none-True"][:2] == (RolloutStatus.FAILURE, "validation_error")
    assert seen["bool-True"][:2] == (RolloutStatus.FAILURE, "validation_error")
    assert seen["error-True"][:2] == (RolloutStatus.FAILURE, "agent_error")
    assert seen["chat-True"][:2] == (RolloutStatus.FAILURE, "http_error")
