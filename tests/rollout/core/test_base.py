"""The agent API: name checks at class definition, the context's metrics, conversation and tracing."""

from __future__ import annotations

import json
import os
import types
from abc import abstractmethod
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.rollout.client import CompletionsResult
from osmosis_ai.rollout.core import base as base_module
from osmosis_ai.rollout.core.base import RolloutAgentLoop, RolloutContext, RolloutResult
from osmosis_ai.rollout.core.exceptions import AgentLoopDefinitionError
from osmosis_ai.rollout.core.llm_client import LLMClientProtocol
from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema, RolloutMetrics, RolloutRequest
from osmosis_ai.rollout.core.tracing import safe_trace_filename


class ScriptedLLM:
    """An in-memory LLM client: answers with queued assistant messages and counts like the real one."""

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    async def chat_completions(self, messages: list[dict[str, Any]], **kwargs: Any) -> CompletionsResult:
        self.calls.append((messages, kwargs))
        message = self.replies.pop(0)
        return CompletionsResult(message=message, token_ids=[], logprobs=[], usage={}, finish_reason="stop")

    def get_metrics(self) -> RolloutMetrics:
        return RolloutMetrics(
            llm_latency_ms=12.5, num_llm_calls=len(self.calls), prompt_tokens=7, response_tokens=3
        )


def _request(rollout_id: str = "r-1") -> RolloutRequest:
    return RolloutRequest(
        rollout_id=rollout_id,
        server_url="http://127.0.0.1:9",
        messages=[{"role": "user", "content": "hi"}],
        completion_params={"temperature": 0.5},
    )


def _context(llm: Any = None, **kwargs: Any) -> RolloutContext:
    return RolloutContext(
        request=_request(kwargs.pop("rollout_id", "r-1")), tools=[], llm=llm or ScriptedLLM(), **kwargs
    )


# -- class definition ------------------------------------------------------------------------------


def test_concrete_subclass_without_name_fails_at_definition() -> None:
    with pytest.raises(
        TypeError, match="Agent loop class Nameless must define a 'name' class attribute"
    ) as exc:

        class Nameless(RolloutAgentLoop):
            def get_tools(self, request: RolloutRequest) -> list[OpenAIFunctionToolSchema]:
                return []

            async def run(self, ctx: RolloutContext) -> RolloutResult:
                return ctx.complete([])

    assert isinstance(exc.value, AgentLoopDefinitionError)


def test_abstract_intermediate_needs_no_name_but_its_concrete_child_does() -> None:
    class Base(RolloutAgentLoop):
        def get_tools(self, request: RolloutRequest) -> list[OpenAIFunctionToolSchema]:
            return []

        @abstractmethod
        def policy(self) -> str: ...

    class WithoutRun(RolloutAgentLoop):  # run still abstract
        name = ""

    class Concrete(Base):
        name = "concrete"

        def policy(self) -> str:
            return "p"

        async def run(self, ctx: RolloutContext) -> RolloutResult:
            return ctx.complete([])

    class Inherits(Concrete):
        pass

    assert Inherits().name == "concrete"
    assert WithoutRun.__abstractmethods__ == frozenset({"get_tools", "run"})
    with pytest.raises(TypeError, match="must define a 'name'"):

        class Child(Base):
            def policy(self) -> str:
                return "p"

            async def run(self, ctx: RolloutContext) -> RolloutResult:
                return ctx.complete([])


@pytest.mark.parametrize("bad_name", [5, "   ", ["x"]])
def test_name_must_be_a_non_blank_string(bad_name: Any) -> None:
    with pytest.raises(AgentLoopDefinitionError, match="'name' must be a non-blank string"):
        type(
            "Bad",
            (RolloutAgentLoop,),
            {"name": bad_name, "get_tools": lambda self, request: [], "run": lambda self, ctx: None},
        )


def test_get_default_tools_uses_a_discovery_request() -> None:
    seen: list[RolloutRequest] = []

    class Agent(RolloutAgentLoop):
        name = "agent"

        def get_tools(self, request: RolloutRequest) -> list[OpenAIFunctionToolSchema]:
            seen.append(request)
            return []

        async def run(self, ctx: RolloutContext) -> RolloutResult:
            return ctx.complete([])

    assert Agent().get_default_tools() == []
    assert (seen[0].rollout_id, seen[0].server_url, seen[0].messages) == ("discovery", "http://localhost", [])


# -- context --------------------------------------------------------------------------------------


def test_llm_client_protocol_is_structural() -> None:
    assert isinstance(ScriptedLLM(), LLMClientProtocol)
    assert not isinstance(object(), LLMClientProtocol)


async def test_chat_delegates_and_tracks_the_conversation() -> None:
    llm = ScriptedLLM({"role": "assistant", "content": "first"}, {"role": "assistant", "content": "second"})
    ctx = _context(llm)
    assert ctx.conversation == [{"role": "user", "content": "hi"}]
    messages = list(ctx.request.messages)
    result = await ctx.chat(messages, temperature=0.1)
    assert llm.calls[0] == (messages, {"temperature": 0.1})
    assert ctx.conversation == [*messages, {"role": "assistant", "content": "first"}]
    messages.append(result.message)
    messages.append({"role": "user", "content": "more"})
    assert len(ctx.conversation) == 2  # a snapshot, not a live view
    await ctx.chat(messages)
    assert [m["content"] for m in ctx.conversation] == ["hi", "first", "more", "second"]
    ctx.conversation.append({"role": "user"})  # the property returns a copy
    assert len(ctx.conversation) == 4


async def test_failed_chat_keeps_the_previous_conversation() -> None:
    ctx = _context(ScriptedLLM())  # no replies: the call raises
    with pytest.raises(IndexError):
        await ctx.chat([{"role": "user", "content": "x"}])
    assert ctx.conversation == [{"role": "user", "content": "hi"}]


@pytest.fixture
def wall_clock(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """The wall clock the context reads, standing at ``now`` until a test moves it."""
    clock = types.SimpleNamespace(now=2_000_000.0)
    monkeypatch.setattr(base_module, "time", types.SimpleNamespace(time=lambda: clock.now))
    return clock


def test_complete_and_error_take_metrics_now(wall_clock: types.SimpleNamespace) -> None:
    ctx = _context(_start_time=wall_clock.now - 0.25)
    ctx.record_tool_call(2.5)
    ctx.record_tool_call()
    done = ctx.complete([{"role": "user"}], finish_reason="max_turns", reward=0.5)
    assert (done.status, done.finish_reason, done.reward, done.error_message) == (
        "COMPLETED",
        "max_turns",
        0.5,
        None,
    )
    assert done.metrics is not None
    assert done.metrics.total_latency_ms == pytest.approx(250.0)
    assert (done.metrics.tool_latency_ms, done.metrics.num_tool_calls) == (2.5, 2)
    assert (done.metrics.llm_latency_ms, done.metrics.prompt_tokens, done.metrics.response_tokens) == (
        12.5,
        7,
        3,
    )
    failed = ctx.error("boom")
    assert (failed.status, failed.finish_reason, failed.final_messages, failed.reward) == (
        "ERROR",
        "error",
        [],
        None,
    )
    assert failed.error_message == "boom"


def test_total_latency_counts_from_a_wall_clock_start_and_zero_means_unset(
    wall_clock: types.SimpleNamespace,
) -> None:
    ctx = _context(_start_time=wall_clock.now)
    wall_clock.now += 1.0
    wall = ctx.complete([])
    assert wall.metrics is not None and wall.metrics.total_latency_ms == pytest.approx(1000.0)
    unset = _context().complete([])
    assert unset.metrics is not None and unset.metrics.total_latency_ms == 0.0


def test_private_fields_are_hidden_from_repr() -> None:
    assert "_debug_dir" not in repr(_context(_debug_dir="/tmp/x"))


# -- debug tracing ------------------------------------------------------------------------------------


async def test_log_event_is_a_noop_without_debug_dir() -> None:
    ctx = _context()
    assert not ctx.debug_enabled
    assert await ctx.log_event("pre_llm", turn=1) is False


async def test_log_event_appends_jsonl_lines_in_order(tmp_path: Path) -> None:
    ctx = _context(_debug_dir=str(tmp_path / "traces"))
    assert ctx.debug_enabled
    for turn in range(20):
        ctx.log_event("pre_llm", turn=turn)
    assert await ctx.log_event("done", event="override", when=object()) is True
    lines = [json.loads(line) for line in (tmp_path / "traces" / "r-1.jsonl").read_text().splitlines()]
    assert [line["turn"] for line in lines[:20]] == list(range(20))
    assert lines[-1]["event"] == "override"
    assert lines[-1]["rollout_id"] == "r-1"
    assert lines[-1]["when"].startswith("<object object")


def test_log_event_from_synchronous_code(tmp_path: Path) -> None:
    ctx = _context(_debug_dir=str(tmp_path))
    assert ctx.log_event("sync", ok=True).wait(5) is True
    assert json.loads((tmp_path / "r-1.jsonl").read_text()) == {
        "event": "sync",
        "rollout_id": "r-1",
        "ok": True,
    }


async def test_log_event_write_failure_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    ctx = _context(_debug_dir=str(blocker / "sub"))
    assert await ctx.log_event("x") is False
    assert "Could not write debug trace" in caplog.text


@pytest.mark.parametrize(
    "rollout_id", ["../../etc/passwd", "/abs/path", "..", ".hidden", "a\\b", "x" * 256, "ü-ñ"]
)
async def test_hostile_rollout_ids_stay_inside_the_debug_dir(tmp_path: Path, rollout_id: str) -> None:
    debug_dir = tmp_path / "traces"
    ctx = _context(_debug_dir=str(debug_dir), rollout_id=rollout_id)
    assert await ctx.log_event("x") is True
    (written,) = list(debug_dir.iterdir())
    assert written.parent == debug_dir
    assert not written.name.startswith(".")
    assert os.sep not in written.name and "\\" not in written.name


@pytest.mark.parametrize(
    ("rollout_id", "expected"),
    [("r-1", "r-1.jsonl"), ("batch_7.turn-2", "batch_7.turn-2.jsonl"), ("x" * 128, "x" * 128 + ".jsonl")],
)
def test_plain_rollout_ids_keep_their_name(rollout_id: str, expected: str) -> None:
    assert safe_trace_filename(rollout_id) == expected


def test_rewritten_names_are_distinct() -> None:
    names = {safe_trace_filename(rid) for rid in ["a/b", "a_b/", "a:b", "a b", "x" * 129, "x" * 130]}
    assert len(names) == 6
    assert "a_b.jsonl" not in names  # "a/b" must not collide with the plain id "a_b"


def test_module_logger_is_public() -> None:
    import logging

    from osmosis_ai.rollout.core import base

    assert isinstance(base.logger, logging.Logger)
    assert base.logger.name == "osmosis_ai.rollout.core.base"
