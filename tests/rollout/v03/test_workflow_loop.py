"""A 0.3 workflow and grader as a 0.2 agent loop (``WorkflowAgentLoop``): the unchanged
``project/main.py`` pair served over 0.2's wire to ``osmosis rollout run --url`` (the 0.2 TrainGate),
and run in-process by ``osmosis test`` (``-m main:Workflow --grader main:Grader``, or ``-m main:app``);
the policy is the OpenAI-compatible stand-in answering ``what is A + B?`` with the sum."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from examples.calculator.reward import calculator_reward
from examples.calculator.tools import TOOLS, run_tool
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.bridge import WorkflowAgentLoop
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from tests.rollout.v03.project.main import ExactAnswerGrader, OneCallWorkflow
from tests.rollout.v03.served import MAIN, sums_dataset
from tests.support.cli import CALCULATOR_DATASET, Ran, cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.serve import ServeProcess
from tests.support.server import RunningServer

ROWS = 4


def _dataset(tmp_path: Path) -> Path:
    return sums_dataset(tmp_path, ROWS)


def _records(out: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["row_index"])


def _graded(records: list[dict[str, Any]]) -> None:
    assert [r["row_index"] for r in records] == list(range(ROWS))
    for record in records:
        assert record["outcome"] == "completed", record
        assert record["reward"] == (1.0 if record["row_index"] % 2 == 0 else 0.0), record
        assert record["final_messages"][-1] == {"role": "assistant", "content": str(record["row_index"] + 2)}


def test_the_0_3_project_served_over_0_2s_wire_is_driven_by_rollout_run(
    serve: Callable[..., RunningServer], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    server = serve(WorkflowAgentLoop(LocalBackend(workflow=OneCallWorkflow, grader=ExactAnswerGrader)))
    out = tmp_path / "records.jsonl"
    ran = cli(
        "rollout", "run", "--url", server.url, "-d", str(_dataset(tmp_path)), "--model", "openai/policy",
        "--base-url", arithmetic.url, "--api-key", "sk-policy", "-o", str(out), "-q", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr + ran.stdout
    records = _records(out)
    _graded(records)
    for record in records:  # the grader's reward is what the agent reported, through the 0.2 callback
        assert record["status"] == "COMPLETED" and record["agent_reward"] == record["reward"]
        (turn,) = record["turns"]  # the workflow's call reached the TrainGate as the rollout's own chat
        assert turn["token_ids"]
        assert record["rejected_calls"] == []


def _project(tmp_path: Path) -> Path:
    """A directory with a copy of the project's ``main.py`` (so its ``main`` is imported afresh) and
    ``probes.py`` (this module's workflows and graders)."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    shutil.copy(MAIN, project / "main.py")
    (project / "probes.py").write_text(
        "from tests.rollout.v03.test_workflow_loop import CalculatorGrader, CalculatorWorkflow, Probing\n"
    )
    return project


def _test(
    tmp_path: Path, policy: OpenAIServer, *agent: str, command: str = "test", extra: tuple[str, ...] = ()
) -> tuple[Ran, Path]:
    """``osmosis test`` (or ``command``) of ``agent`` in :func:`_project`."""
    project = _project(tmp_path)
    out = tmp_path / f"test-{len(list(tmp_path.glob('test-*.jsonl')))}.jsonl"
    ran = cli(
        command, *agent, "-d", str(_dataset(tmp_path)), "--model", "openai/policy",
        "--base-url", policy.url, "--api-key", "sk-policy", "-o", str(out), "-q", *extra,
        cwd=project, env={"XDG_STATE_HOME": str(tmp_path / "state")},
    )  # fmt: skip
    return ran, out


def _output_rows(out: Path) -> list[dict[str, Any]]:
    document = json.loads(out.read_text())
    rows = document["results"] if isinstance(document, dict) else document
    return sorted(rows, key=lambda r: r["row_index"])


@pytest.mark.parametrize(
    "agent",
    [("-m", "main:OneCallWorkflow", "--grader", "main:ExactAnswerGrader"), ("-m", "main:app")],
    ids=["workflow-and-grader", "server-app"],
)
def test_osmosis_test_runs_a_workflow_and_grader_in_process(
    agent: tuple[str, ...], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    ran, out = _test(tmp_path, arithmetic, *agent, extra=("--report", str(page)))
    assert ran.returncode == 0, ran.stderr + ran.stdout
    _graded(_output_rows(out))
    assert f"{ROWS} rows: {ROWS} completed (100.0%); mean reward 0.500" in ran.stdout
    assert "<html" in page.read_text().lower()
    assert len(arithmetic.requests) >= ROWS


def test_a_model_failure_under_a_workflow_stays_a_model_error(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    def refuse_rollouts(payload: Any) -> Reply:  # the run's preflight passes, every row's call fails
        return Reply(status=400) if "what is" in json.dumps(payload["messages"]) else Reply()

    openai_server.handler = refuse_rollouts
    agent = ("-m", "main:OneCallWorkflow", "--grader", "main:ExactAnswerGrader")  # it raises on the 502
    ran, out = _test(tmp_path, openai_server, *agent, extra=("--limit", "1"))
    assert ran.returncode == 1 and "model_error 1" in ran.stdout, ran.stderr  # every row failed
    (row,) = _output_rows(out)
    assert row["outcome"] == "model_error", row
    assert "400" in row["error"], row
    assert row.get("reward") is None


def test_osmosis_eval_scores_a_workflow_by_its_grader_with_pass_at_k_and_a_resumable_journal(
    arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    agent = ("-m", "main:OneCallWorkflow", "--grader", "main:ExactAnswerGrader")
    journal, page = tmp_path / "journal", tmp_path / "report.html"
    ran, out = _test(tmp_path, arithmetic, *agent, command="eval", extra=("--n", "2", "--journal", str(journal),
                                                                          "--report", str(page)))  # fmt: skip
    assert ran.returncode == 0, ran.stderr + ran.stdout
    figures = json.loads(out.read_text())["summary"]["eval_fns"]["main:ExactAnswerGrader"]
    assert (figures["mean"], figures["pass_at_1"], figures["runs"]) == (0.5, 0.5, 2 * ROWS)
    assert "main:ExactAnswerGrader" in page.read_text()
    calls = len(arithmetic.requests)
    again, _ = _test(
        tmp_path, arithmetic, *agent, command="eval", extra=("--n", "2", "--journal", str(journal))
    )
    assert again.returncode == 0, again.stderr
    assert len(arithmetic.requests) == calls  # every sample came from the journal


class Probing(AgentWorkflow):
    """Knocks on the rollout's chat endpoint with another key and with ``stream``, then calls it."""

    async def run(self, ctx: AgentWorkflowContext) -> list[dict[str, Any]]:
        rollout = get_rollout_context()
        assert rollout is not None
        url = f"{rollout.chat_completions_url}/chat/completions"
        own = {"Authorization": f"Bearer {rollout.api_key}"}
        body = {"model": "x", "messages": ctx.prompt}
        async with httpx.AsyncClient(timeout=30) as client:
            other_key = await client.post(url, json=body, headers={"Authorization": "Bearer guess"})
            streamed = await client.post(url, json={**body, "stream": True}, headers=own)
            answer = await client.post(url, json={**body, "temperature": 0.0}, headers=own)
        assert (other_key.status_code, streamed.status_code, answer.status_code) == (401, 400, 200)
        return [*ctx.prompt, answer.json()["choices"][0]["message"]]


def test_the_rollouts_chat_endpoint_takes_only_its_own_key_and_whole_replies(
    arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    agent = ("-m", "probes:Probing", "--grader", "main:ExactAnswerGrader")
    ran, out = _test(tmp_path, arithmetic, *agent, extra=("--limit", "1"))
    assert ran.returncode == 0, ran.stderr + ran.stdout
    (row,) = _output_rows(out)
    assert (row["outcome"], row["reward"]) == ("completed", 1.0)
    (call,) = [r for r in arithmetic.requests if "what is" in json.dumps(r.json)]  # only the admitted one
    assert call.json["temperature"] == 0.0


class CalculatorWorkflow(AgentWorkflow):
    """The calculator as a 0.3 workflow: its tools sent with each call, run until the model answers."""

    async def run(self, ctx: AgentWorkflowContext) -> list[dict[str, Any]]:
        rollout = get_rollout_context()
        assert rollout is not None
        messages = list(ctx.prompt)
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(4):
                answer = await client.post(
                    f"{rollout.chat_completions_url}/chat/completions",
                    json={"model": "m", "messages": messages, "tools": TOOLS},
                    headers={"Authorization": f"Bearer {rollout.api_key}"},
                )
                answer.raise_for_status()
                message = answer.json()["choices"][0]["message"]
                messages.append(message)
                if not message.get("tool_calls"):
                    break
                for call in message["tool_calls"]:
                    result = run_tool(call["function"]["name"], call["function"]["arguments"])
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return messages


class CalculatorGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None and ctx.label is not None
        ctx.set_reward(calculator_reward(str(ctx.sample.messages[-1].get("content") or ""), ctx.label))


def test_osmosis_test_runs_a_tool_calling_workflow_with_the_scripted_model(tmp_path: Path) -> None:
    project = _project(tmp_path)
    out = tmp_path / "out.json"
    ran = cli(
        "test", "-m", "probes:CalculatorWorkflow", "--grader", "probes:CalculatorGrader",
        "-d", str(CALCULATOR_DATASET), "--model", "scripted", "-o", str(out), "-q", cwd=project,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr + ran.stdout
    rows = _output_rows(out)
    assert len(rows) == len(CALCULATOR_DATASET.read_text().splitlines())
    assert all((row["outcome"], row["reward"]) == ("completed", 1.0) for row in rows), rows


@pytest.mark.parametrize(
    "agent",
    [("-m", "main:OneCallWorkflow", "--grader", "main:ExactAnswerGrader"), ("-m", "main:app")],
    ids=["workflow-and-grader", "server-app"],
)
def test_osmosis_serve_workers_serve_the_pair_on_0_2s_wire(
    agent: tuple[str, ...], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    server = ServeProcess("--local", *agent, "--wire", "0.2", "--workers", "2", cwd=_project(tmp_path))
    try:
        server.wait_ready(timeout=60)  # each spawned worker loads the pair again by name
        out = tmp_path / "records.jsonl"
        ran = cli(
            "rollout", "run", "--url", server.url, "-d", str(_dataset(tmp_path)), "--model", "openai/policy",
            "--base-url", arithmetic.url, "--api-key", "sk-policy", "-o", str(out), "-q", cwd=tmp_path,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr + ran.stdout
        _graded(_records(out))
    finally:
        _, _, err = server.stop()
    assert "Traceback" not in err, err


@pytest.mark.parametrize(
    ("agent", "error"),
    [
        (("-m", "main:ExactAnswerGrader", "--grader", "main:ExactAnswerGrader"),
         "'main:ExactAnswerGrader' is not a 0.3 AgentWorkflow: a grader goes with an AgentWorkflow subclass"),
        (("-m", "main:app", "--grader", "main:ExactAnswerGrader"),
         "'main:app' already has its grader (its LocalBackend's): leave out --grader"),
        (("-m", "main:OneCallWorkflow", "--grader", "main:OneCallWorkflow"),
         "--grader 'main:OneCallWorkflow': LocalBackend(grader=...) must be a Grader subclass"),
        (("--mcp", ".", "--grader", "main:ExactAnswerGrader"),
         "a grader goes with an AgentWorkflow named by -m, not with MCP tools"),
    ],
)  # fmt: skip
def test_a_misnamed_grader_is_one_line(agent: tuple[str, ...], error: str, tmp_path: Path) -> None:
    ran = cli("test", *agent, "-d", str(_dataset(tmp_path)), "--model", "scripted", cwd=_project(tmp_path))
    assert ran.returncode == 1
    assert ran.stderr.startswith(f"Error: {error}") and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
