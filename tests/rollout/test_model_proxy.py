"""``ctx.base_url``: a 0.2 agent's model reached by the real ``openai`` client instead of ``ctx.chat``.

Served runs go through ``osmosis rollout run`` (the local TrainGate records the token ids and checks
the append-only contract), in-process runs through ``osmosis test``; the refusals talk to a real
TrainGate through the server's own trainer client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from examples.calculator.tools import TOOLS
from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.core.base import RolloutContext
from osmosis_ai.rollout.core.schemas import RolloutRequest
from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.policy import make_policy
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.serve import ServeProcess

WHOLE = "tests.support.openai_agent:agent_loop"
STREAMED = "tests.support.openai_agent:streaming_agent_loop"
QUESTION = [{"role": "system", "content": "calculate"}, {"role": "user", "content": "What is 2 + 3?"}]


def _rollout_run(tmp_path: Path, agent: str) -> list[dict[str, Any]]:
    out = tmp_path / f"{agent.rpartition(':')[2]}-{agent.partition(':')[0]}.jsonl"
    ran = cli("rollout", "run", "-m", agent, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
              "--output", str(out), "--quiet")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return sorted(records, key=lambda record: (record["row_index"], record["sample_index"]))


def _trained_on(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(t["prompt_token_ids"], t["token_ids"], t["logprobs"], t["message"]) for t in record["turns"]]


def test_an_openai_client_on_base_url_gets_what_ctx_chat_gets(tmp_path: Path) -> None:
    by_chat = _rollout_run(tmp_path, CALCULATOR)
    assert all(len(record["turns"]) == 2 for record in by_chat)  # a tool call, then the answer
    for agent in (WHOLE, STREAMED):
        records = _rollout_run(tmp_path, agent)
        assert len(records) == len(by_chat)
        for mine, theirs in zip(records, by_chat, strict=True):
            assert mine["status"] == "COMPLETED", mine["error_message"]
            assert mine["append_only_violations"] == [] and mine["rejected_calls"] == []
            assert _trained_on(mine) == _trained_on(theirs)
            assert mine["final_messages"] == theirs["final_messages"]
            assert mine["metrics"]["num_llm_calls"] == theirs["metrics"]["num_llm_calls"] == 2


# With a time limit the agent runs on an event loop of another thread, its calls sent back to the run's.
LOOPS = pytest.mark.parametrize("limit", [(), ("--timeout", "60")], ids=["run-loop", "agent-loop"])


@LOOPS
def test_in_process_runs_answer_base_url_with_the_rows_model(tmp_path: Path, limit: tuple[str, ...]) -> None:
    """``osmosis test``: the item's own model client answers, with its tools and counters."""
    with OpenAIServer() as server:
        server.default = Reply(content="The answer is #### 19")
        out = tmp_path / "results.json"
        ran = cli("test", "-m", STREAMED, "-d", str(CALCULATOR_DATASET), "--limit", "1", "--model", "m",
                  "--base-url", server.url, "--api-key", "k", "-o", str(out), "--quiet", *limit)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        # The preflight's one token, then the row's call, which carries the row's tools.
        assert [r.json.get("tools") for r in server.requests] == [None, TOOLS], server.requests
    (row,) = json.loads(out.read_text())["results"]
    assert row["outcome"] == "completed" and row["token_usage"]["num_llm_calls"] == 1
    assert row["final_messages"][-1] == {"role": "assistant", "content": "The answer is #### 19"}


def _context(gate: TrainGate, rollout_id: str) -> RolloutContext:
    session = gate.open_session(rollout_id, QUESTION, tools=TOOLS)
    request = RolloutRequest(rollout_id=rollout_id, server_url=gate.url, messages=QUESTION,
                             completion_params={}, api_key=session.callback_key)  # fmt: skip
    llm = OsmosisLLMClient(gate.url, rollout_id, api_key=session.callback_key)
    return RolloutContext(request=request, tools=TOOLS, llm=llm)


@pytest.fixture
async def gate() -> AsyncIterator[TrainGate]:
    async with TrainGate(make_policy("scripted")) as started:
        yield started


async def _ask(base_url: str, api_key: str) -> Any:
    # Closed here: a client left to the garbage collector would close on a loop already gone, and
    # asyncio's report of that would land in a later in-process test's stderr.
    async with openai.AsyncOpenAI(base_url=base_url, api_key=api_key) as client:
        return await client.chat.completions.create(model="policy", messages=QUESTION)  # type: ignore[arg-type]


async def test_only_the_rollouts_own_key_opens_its_url(gate: TrainGate) -> None:
    mine, other = _context(gate, "rollout/a"), _context(gate, "rollout-b")
    assert "/rollouts/rollout%2Fa/v1" in mine.base_url and mine.api_key != other.api_key
    with pytest.raises(openai.AuthenticationError) as refused:
        await _ask(mine.base_url, other.api_key)
    assert refused.value.body["code"] == "invalid_api_key"  # type: ignore[index]
    unknown = mine.base_url.replace("rollout%2Fa", "rollout-c")
    with pytest.raises(openai.NotFoundError) as missing:
        await _ask(unknown, mine.api_key)
    assert missing.value.body["code"] == "rollout_not_found"  # type: ignore[index]
    assert gate.sessions["rollout/a"].turns == []  # nothing refused reached the trainer

    reply = await _ask(mine.base_url, mine.api_key)
    (turn,) = gate.sessions["rollout/a"].turns
    assert reply.model_extra["token_ids"] == turn.token_ids and turn.token_ids
    assert mine.conversation == [*QUESTION, turn.message]  # kept for an ERROR result, as ctx.chat keeps it
    assert mine.llm.get_metrics().num_llm_calls == 1

    mine._end_model_route()
    with pytest.raises(openai.NotFoundError):
        await _ask(mine.base_url, mine.api_key)
    assert len(gate.sessions["rollout/a"].turns) == 1


async def test_a_refusal_by_the_trainer_is_passed_on_and_not_retried(gate: TrainGate) -> None:
    ctx = _context(gate, "ended")
    await ctx.llm.complete_rollout("COMPLETED", QUESTION)  # type: ignore[attr-defined]
    with pytest.raises(openai.ConflictError) as refused:  # 409: the openai client would retry it
        await _ask(ctx.base_url, ctx.api_key)
    assert "has already ended" in refused.value.message
    assert [call.status for call in gate.sessions["ended"].rejected] == [409]


@LOOPS
def test_in_process_a_failed_call_through_base_url_is_the_models_failure(
    tmp_path: Path, limit: tuple[str, ...]
) -> None:
    """The agent sees an HTTP error from its client; the row is still a model_error, as with ctx.chat."""
    with OpenAIServer() as server:
        server.handler = lambda body: Reply(status=400) if body.get("tools") else Reply(content="ok")
        out = tmp_path / "results.json"
        ran = cli("test", "-m", WHOLE, "-d", str(CALCULATOR_DATASET), "--limit", "1", "--model", "m",
                  "--base-url", server.url, "--api-key", "k", "-o", str(out), "--quiet", *limit)  # fmt: skip
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    (row,) = json.loads(out.read_text())["results"]
    assert row["outcome"] == "model_error", row


async def _until(predicate: Callable[[], Any]) -> None:
    """Let the loop run until ``predicate()`` holds (the bound is a hang's, not a speed claim)."""

    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 10)


async def test_ending_the_rollout_cancels_its_calls_in_flight() -> None:
    """An agent still calling after its rollout ended (abandoned, say) gets 404; the trainer's call is dropped."""
    with OpenAIServer() as trainer:
        trainer.default = Reply(content="late", delay=60)  # ends early when the caller leaves
        request = RolloutRequest(rollout_id="r", server_url=trainer.url.removesuffix("/v1"), messages=QUESTION,
                                 completion_params={})  # fmt: skip
        ctx = RolloutContext(request=request, tools=[], llm=OsmosisLLMClient(request.server_url, "r"))
        call = asyncio.ensure_future(_ask(ctx.base_url, ctx.api_key))
        await _until(lambda: trainer.in_flight.now == 1)
        ctx._end_model_route()
        with pytest.raises(openai.NotFoundError):
            await call
        await _until(lambda: trainer.in_flight.now == 0)  # the trainer's call was given up
        assert len(trainer.requests) == 1 and ctx.llm.get_metrics().num_llm_calls == 0


def test_base_url_is_read_inside_run() -> None:
    request = RolloutRequest(
        rollout_id="r", server_url="http://127.0.0.1:9", messages=QUESTION, completion_params={}
    )
    ctx = RolloutContext(request=request, tools=[], llm=OsmosisLLMClient(request.server_url, "r"))
    with pytest.raises(RuntimeError, match="inside the agent's async run"):
        ctx.base_url  # noqa: B018


@pytest.mark.slow  # starting two worker processes (~10 s on a loaded machine)
def test_serve_workers_each_answer_the_urls_of_their_own_rollouts(tmp_path: Path) -> None:
    """``osmosis serve --workers 2``: every rollout's URL is answered by the process running it."""
    server = ServeProcess("--local", "--no-validate", "-m", STREAMED, "--workers", "2")
    try:
        server.wait_ready()
        out = tmp_path / "records.jsonl"
        ran = cli("rollout", "run", "--url", server.url, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
                  "--output", str(out), "--quiet")  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    finally:
        code, _out, err = server.stop()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(CALCULATOR_DATASET.read_text().splitlines())
    assert all(r["status"] == "COMPLETED" and r["append_only_violations"] == [] for r in records)
    assert code == 0 and "Traceback" not in err
