"""``osmosis rollout run --url`` against a 0.3 server: told from a 0.2 one by its ``/health`` and driven
over 0.3's wire (``POST /rollout``, the rollout-scoped chat base on the TrainGate, the leased result
poll), both this package's server and upstream 0.3.8's own running the unchanged ``project/main.py``;
the policy is the OpenAI-compatible stand-in answering ``what is A + B?`` with the sum."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from osmosis_ai.errors import InfrastructureError
from osmosis_ai.outcome import Outcome
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.types import (
    AgentWorkflowConfig,
    RolloutErrorCategory,
    RolloutResultResponse,
    RolloutSample,
    RolloutStatus,
)
from osmosis_ai.runs.executors.traingate03 import settle
from osmosis_ai.traingate.session import RolloutSession
from tests.rollout.v03.served import KEY, Served, sums_dataset, without_this_repo
from tests.support.cli import Ran, cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.server import RunningServer
from tests.support.waiting import wait_until

ROWS = 6


def _dataset(tmp_path: Path) -> Path:
    return sums_dataset(tmp_path, ROWS)


def _run(server: Served, policy: OpenAIServer, data: Path, tmp_path: Path, *extra: str) -> Ran:
    return cli(
        "rollout", "run", "--url", server.url, "--server-api-key", KEY, "-d", str(data),
        "--model", "openai/policy", "--base-url", policy.url, "--api-key", "sk-policy",
        "--journal", str(tmp_path / "journal.jsonl"), *extra,
        cwd=tmp_path, env={"COLUMNS": "120"},
    )  # fmt: skip


def _rollout_chats(policy: OpenAIServer) -> list[Any]:
    """The policy's chat calls made for rollouts (not the run's preflight of the policy)."""
    return [r for r in policy.requests if "what is" in json.dumps((r.json or {}).get("messages"))]


def _records(out: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["row_index"])


def _assert_every_row_completed_with_the_graders_reward(out: Path) -> None:
    records = _records(out)
    assert [r["row_index"] for r in records] == list(range(ROWS))
    for record in records:
        assert (record["status"], record["outcome"]) == ("COMPLETED", "completed"), record
        assert record["agent_reward"] == record["reward"] == (1.0 if record["row_index"] % 2 == 0 else 0.0)
        assert record["append_only_violations"] == [] and record["rejected_calls"] == []
        (turn,) = record["turns"]  # served by the gateway's rollout-scoped chat endpoint, with token ids
        assert turn["token_ids"] and turn["prompt_token_ids"]
        assert record["final_messages"][-1] == {"role": "assistant", "content": str(record["row_index"] + 2)}


def test_rollout_run_drives_this_packages_0_3_server_with_journal_resume_and_report(
    serve_main: Callable[..., Served], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    server = serve_main()
    data, out, page = _dataset(tmp_path), tmp_path / "records.jsonl", tmp_path / "report.html"
    ran = _run(server, arithmetic, data, tmp_path, "-o", str(out), "--report", str(page))
    assert ran.returncode == 0, ran.stderr + ran.stdout
    _assert_every_row_completed_with_the_graders_reward(out)
    assert len(_rollout_chats(arithmetic)) == ROWS
    assert "<html" in page.read_text().lower()
    again = _run(server, arithmetic, data, tmp_path, "-q")  # resumed from the journal: nothing runs again
    assert again.returncode == 0, again.stderr
    assert len(_rollout_chats(arithmetic)) == ROWS
    assert f"{ROWS} rollouts: {ROWS} completed" in again.stdout


def test_rollout_run_drives_upstreams_own_0_3_server(
    upstream_python: Path,
    serve_main: Callable[..., Served],
    arithmetic: OpenAIServer,
    tmp_path: Path,
) -> None:
    server = serve_main(upstream_python, without_this_repo(), _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(tmp_path))
    out = tmp_path / "records.jsonl"
    ran = _run(server, arithmetic, _dataset(tmp_path), tmp_path, "-o", str(out), "-q")
    assert ran.returncode == 0, ran.stderr + ran.stdout + server.log.read_text()[-3000:]
    _assert_every_row_completed_with_the_graders_reward(out)
    assert "RolloutServer starting" not in server.log.read_text()  # upstream's server, not this package's


class ByMode(AgentWorkflow[AgentWorkflowConfig]):
    """One chat call through the rollout's chat base, unless the row's ``mode`` is ``agent`` (raises)."""

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> list[dict[str, Any]]:
        if (ctx.metadata or {}).get("mode") == "agent":
            raise RuntimeError("the workflow broke on purpose")
        rollout = get_rollout_context()
        assert rollout is not None
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.post(
                f"{rollout.chat_completions_url}/chat/completions",
                json={"model": "policy", "messages": ctx.prompt},
                headers={"Authorization": f"Bearer {rollout.api_key}"},
            )
            answer.raise_for_status()
        return [*ctx.prompt, answer.json()["choices"][0]["message"]]


class GradedByMode(Grader):
    """The label's match, unless the row's ``mode`` is ``grader`` (raises) or ``infra`` (its sandbox is down)."""

    async def grade(self, ctx: GraderContext) -> None:
        if (ctx.metadata or {}).get("mode") == "grader":
            raise RuntimeError("the grader broke on purpose")
        if (ctx.metadata or {}).get("mode") == "infra":
            raise InfrastructureError("the sandbox could not run the code")
        assert ctx.sample is not None
        ctx.set_reward(1.0 if str(ctx.sample.messages[-1]["content"]).strip() == ctx.label else 0.0)


def test_a_0_3_workflows_and_graders_failures_are_typed_and_never_a_reward(
    serve03: Callable[..., RunningServer], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    server = serve03(LocalBackend(workflow=ByMode, grader=GradedByMode))
    data = tmp_path / "modes.jsonl"
    data.write_text("".join(
        json.dumps({"system_prompt": "s", "user_prompt": f"what is {i} + 2?", "ground_truth": str(i + 2),
                    "mode": mode}) + "\n"
        for i, mode in enumerate(["ok", "agent", "grader", "infra"])
    ))  # fmt: skip
    out = tmp_path / "records.jsonl"
    ran = cli(
        "rollout", "run", "--url", server.url, "-d", str(data), "--model", "openai/policy",
        "--base-url", arithmetic.url, "--api-key", "sk-policy", "-o", str(out), "-q", "--max-failure-rate", "1",
        cwd=tmp_path,
    )  # fmt: skip
    # the infrastructure failure fails the run, whatever failure rate is allowed, and says why
    assert ran.returncode == 1 and "the sandbox could not run the code" in ran.stderr, ran.stderr
    ok, agent, grader, infra = _records(out)
    assert (ok["outcome"], ok["reward"]) == ("completed", 1.0)
    assert (agent["outcome"], agent["reward"], agent["status"]) == ("agent_error", None, "ERROR")
    assert "the workflow broke on purpose" in agent["error_message"]
    assert (grader["outcome"], grader["reward"], grader["agent_reward"]) == ("reward_error", None, None)
    assert grader["final_messages"][-1]["content"] == "4"  # the workflow's sample is kept
    assert "1 rollout: 1 completed" not in ran.stdout and "reward_error 1" in ran.stdout
    assert "agent_error 1" in ran.stdout
    assert (infra["outcome"], infra["reward"], infra["status"]) == ("infra_error", None, "SERVER_ERROR")
    assert "the sandbox could not run the code" in infra["error_message"]
    assert infra["final_messages"][-1]["content"] == "5"


def test_a_0_3_server_refusing_the_key_is_one_line_before_any_rollout(
    serve_main: Callable[..., Served], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    server = serve_main()
    ran = cli(
        "rollout", "run", "--url", server.url, "--server-api-key", "not-the-key", "-d", str(_dataset(tmp_path)),
        "--model", "openai/policy", "--base-url", arithmetic.url, "--api-key", "sk-policy", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode != 0
    assert f"the rollout server at {server.url} refused the server API key sent (HTTP 401)" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and _rollout_chats(arithmetic) == []


def _session() -> RolloutSession:
    return RolloutSession("r", 0, 0, "key", [{"role": "user", "content": "hi"}], {})


def test_how_a_finished_0_3_result_ends_the_session() -> None:
    sample = RolloutSample(
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "4"}]
    )
    cases = [
        (
            RolloutStatus.FAILURE,
            RolloutErrorCategory.INTERNAL_ERROR,
            None,
            "SERVER_ERROR",
            Outcome.INFRA_ERROR,
        ),
        (
            RolloutStatus.FAILURE,
            RolloutErrorCategory.LEASE_EXPIRED,
            None,
            "SERVER_ERROR",
            Outcome.INFRA_ERROR,
        ),
        (RolloutStatus.FAILURE, RolloutErrorCategory.TIMEOUT, None, "TIMEOUT", Outcome.TIMEOUT),
        (RolloutStatus.FAILURE, RolloutErrorCategory.HTTP_ERROR, None, "ERROR", Outcome.AGENT_ERROR),
        (RolloutStatus.CANCELLED, None, None, "CANCELLED", Outcome.INFRA_ERROR),
        (RolloutStatus.SUCCESS, None, None, "ERROR", Outcome.AGENT_ERROR),  # a success without its sample
    ]
    for status, category, given, ended, outcome in cases:
        session = _session()
        settle(
            session, RolloutResultResponse(rollout_id="r", status=status, err_category=category, sample=given)
        )
        assert (session.status, session.outcome, session.agent_reward) == (ended, outcome, None), (
            status,
            category,
        )
    graded_failure = _session()
    answer = RolloutResultResponse(
        rollout_id="r", status=RolloutStatus.FAILURE, err_category=RolloutErrorCategory.TIMEOUT,
        err_message="grader exceeded its 1.0s deadline", sample=sample,
    )  # fmt: skip
    settle(graded_failure, answer)
    assert graded_failure.status == "COMPLETED" and graded_failure.agent_reward is None
    assert graded_failure.response is not None
    assert graded_failure.response["extra_fields"] == {
        "reward_error": "the grader failed: grader exceeded its 1.0s deadline"
    }
    infrastructure = _session()  # a grader that raised InfrastructureError: never a reward, nor reward_error
    answer = RolloutResultResponse(
        rollout_id="r", status=RolloutStatus.FAILURE, err_category=RolloutErrorCategory.INTERNAL_ERROR,
        err_message="grader: the sandbox could not run the code", sample=sample,
    )  # fmt: skip
    settle(infrastructure, answer)
    assert (infrastructure.status, infrastructure.outcome) == ("SERVER_ERROR", Outcome.INFRA_ERROR)
    assert infrastructure.agent_reward is None and infrastructure.final_messages[-1]["content"] == "4"
    assert infrastructure.error_message == "the grader failed: grader: the sandbox could not run the code"


def test_a_0_3_rollout_past_its_deadline_is_a_timeout_and_cancelled_on_the_server(
    serve_main: Callable[..., Served], openai_server: OpenAIServer, tmp_path: Path
) -> None:
    server = serve_main()
    held = threading.Event()
    openai_server.handler = lambda payload: (  # the rollout's call is held; the policy's preflight is not
        Reply(content="2", gate=held) if "what is" in json.dumps(payload["messages"]) else "ok"
    )
    data = tmp_path / "one.jsonl"
    data.write_text(
        json.dumps({"system_prompt": "s", "user_prompt": "what is 0 + 2?", "ground_truth": "2"}) + "\n"
    )
    out = tmp_path / "records.jsonl"
    cancelled = '"POST /rollout/cancel HTTP/1.1" 200'

    def release_once_cancelled() -> None:  # the held call ends then, not at the stand-in's own limit
        try:
            wait_until(lambda: cancelled in server.log.read_text(), 60, "the rollout cancelled on the server")
        finally:
            held.set()

    releaser = threading.Thread(target=release_once_cancelled, daemon=True)
    releaser.start()
    try:
        ran = _run(server, openai_server, data, tmp_path, "--timeout", "2", "-o", str(out), "-q")
    finally:
        held.set()
        releaser.join()
    assert ran.returncode == 1
    (record,) = _records(out)
    assert (record["outcome"], record["reward"], record["status"]) == ("timeout", None, "TIMEOUT")
    assert record["error_message"].startswith(f"no result from {server.url} within 2s")
    assert cancelled in server.log.read_text()


def test_a_full_0_3_server_is_waited_out_and_every_row_completes(
    serve_main: Callable[..., Served], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    server = serve_main(OSMOSIS_ROLLOUT_SERVER_MAX_QUEUED_ROLLOUTS="0")  # 4 slots, no queue
    held = threading.Event()
    answer = arithmetic.handler
    assert answer is not None
    arithmetic.handler = lambda payload: (
        Reply(content=str(answer(payload)), gate=held)
        if "what is" in json.dumps(payload["messages"])
        else "ok"
    )

    def release_once_refused() -> None:  # 4 rollouts hold the slots until a fifth has been refused
        try:
            wait_until(lambda: arithmetic.in_flight.now == 4, 60, "the 4 slots taken by held chat calls")
            wait_until(
                lambda: '"POST /rollout HTTP/1.1" 429' in server.log.read_text(), 60, "a submit refused"
            )
        finally:
            held.set()

    releaser = threading.Thread(target=release_once_refused, daemon=True)
    releaser.start()
    out = tmp_path / "records.jsonl"
    try:
        ran = _run(
            server, arithmetic, _dataset(tmp_path), tmp_path, "--concurrency", "6", "-o", str(out), "-q"
        )
    finally:
        held.set()
        releaser.join()
    assert ran.returncode == 0, ran.stderr
    _assert_every_row_completed_with_the_graders_reward(out)
    assert '"POST /rollout HTTP/1.1" 429' in server.log.read_text() and arithmetic.in_flight.peak == 4
