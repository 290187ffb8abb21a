"""The 0.3 programming model at its 0.3 import paths: types, contexts, ``LocalBackend``, and the
names 0.2 already gave another meaning (which keeps it)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

import osmosis_ai
import osmosis_ai.rollout as rollout
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import (
    AgentWorkflowContext,
    GraderContext,
    RolloutContext,
    SampleSource,
    get_rollout_context,
)
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.types import (
    AgentWorkflowConfig,
    AgentWorkflowOutput,
    ConcurrencyConfig,
    ExecutionRequest,
    RolloutErrorCategory,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutSample,
    RolloutStatus,
)

PROMPT = [{"role": "user", "content": "2+2?"}]


class Answer(AgentWorkflow[AgentWorkflowConfig]):
    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> Any:
        return [*ctx.prompt, {"role": "assistant", "content": "4"}]


class Exact(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


class Forgetful(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        return None


def request(**fields: Any) -> ExecutionRequest:
    return ExecutionRequest(**{"id": "r1", "prompt": PROMPT, "label": "4", **fields})


def test_the_names_0_2_gave_another_meaning_keep_it() -> None:
    from osmosis_ai.rollout.core.base import RolloutContext as RolloutContext02

    assert rollout.RolloutContext is RolloutContext02
    assert rollout.RolloutContext is not RolloutContext
    assert rollout.RolloutStatus.COMPLETED.value == "COMPLETED"
    assert not inspect.iscoroutinefunction(osmosis_ai.evaluate_rubric)
    from osmosis_ai.eval.rubric import evaluate_rubric

    assert inspect.iscoroutinefunction(evaluate_rubric)


def test_create_rollout_server_resolves_at_both_of_0_3s_paths() -> None:
    from osmosis_ai.rollout.server import create_rollout_server
    from osmosis_ai.rollout.server.app import POLLING_LEASE_HEADER, create_app
    from osmosis_ai.rollout.server.app import create_rollout_server as at_app

    assert at_app is create_rollout_server and callable(create_app)
    assert POLLING_LEASE_HEADER == "X-Osmosis-Rollout-Lease"
    with pytest.raises(ImportError):
        from osmosis_ai.rollout.server.app import nothing_here  # noqa: F401


def test_the_0_3_names_also_resolve_from_the_rollout_package() -> None:
    assert rollout.AgentWorkflow is AgentWorkflow
    assert rollout.LocalBackend is LocalBackend
    assert rollout.get_rollout_context is get_rollout_context
    assert rollout.RolloutSample is RolloutSample


def test_the_status_and_error_vocabularies_are_0_3s() -> None:
    assert [s.value for s in RolloutStatus] == [
        "queued", "running", "grading", "success", "failure", "cancelled", "unknown",
    ]  # fmt: skip
    assert {c.value for c in RolloutErrorCategory} == {
        "timeout", "lease_expired", "validation_error", "http_error", "agent_error", "internal_error",
    }  # fmt: skip
    assert str(RolloutStatus.SUCCESS) == "success" and f"{RolloutErrorCategory.TIMEOUT}" == "timeout"


def test_a_sample_keeps_a_trajectory_copy_and_only_finite_rewards() -> None:
    sample = RolloutSample(messages=PROMPT)
    assert sample.trajectory_messages == PROMPT and sample.trajectory_messages is not sample.messages
    assert RolloutSample(messages=PROMPT, trajectory_messages=None).trajectory_messages is None
    ctx = GraderContext(sample=sample)
    with pytest.raises(ValidationError):
        ctx.set_reward(float("nan"))
    ctx.set_reward(0.5)
    assert sample.reward == 0.5
    with pytest.raises(ValueError, match="no sample"):
        GraderContext().set_reward(1.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("rollout_id", "a/b"), ("rollout_id", ".."), ("rollout_id", ""), ("rollout_id", "a\\b"),
     ("agent_timeout_sec", float("inf")), ("llm_api_key", "")],
)  # fmt: skip
def test_the_submit_body_refuses_what_0_3_refuses(field: str, value: Any) -> None:
    body = {"initial_messages": PROMPT, "rollout_id": "r1", "chat_completions_url": "http://x", field: value}
    with pytest.raises(ValidationError, match=field):
        RolloutInitRequest.model_validate(body)


def test_a_lease_must_outlast_a_poll() -> None:
    fields = {
        "rollout_id": "r",
        "status": "queued",
        "polling_lease_token": "t",
        "result_wait_timeout_sec": 30,
    }
    assert RolloutInitResponse(**fields, polling_lease_timeout_sec=31).status is RolloutStatus.QUEUED
    with pytest.raises(ValidationError, match="longer than"):
        RolloutInitResponse(**fields, polling_lease_timeout_sec=30)


async def test_the_backend_runs_the_workflow_and_grades_its_sample() -> None:
    backend = LocalBackend(workflow=Answer, grader=Exact)
    sample = await backend.run_workflow(request())
    assert sample is not None and sample.label == "4" and sample.messages[-1]["content"] == "4"
    graded = await backend.grade(request(), sample)
    assert graded.reward == 1.0
    assert (await backend.grade(request(label="5"), await backend.run_workflow(request()))).reward == 0.0


async def test_a_grader_that_sets_no_reward_is_an_error_not_a_zero() -> None:
    backend = LocalBackend(workflow=Answer, grader=Forgetful)
    sample = await backend.run_workflow(request())
    with pytest.raises(ValueError, match="set no reward"):
        await backend.grade(request(), sample)


async def test_a_workflow_returning_none_gives_the_registered_sources_sample() -> None:
    class Source(SampleSource):
        async def get_sample(self) -> RolloutSample:
            return RolloutSample(messages=[{"role": "assistant", "content": "from the source"}])

    class Registers(AgentWorkflow[AgentWorkflowConfig]):
        async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> None:
            context = get_rollout_context()
            assert context is not None
            context.set_sample_source(Source())
            with pytest.raises(ValueError, match="already has a sample source"):
                context.set_sample_source(Source())

    backend = LocalBackend(workflow=Registers)
    with RolloutContext(rollout_id="r1"):
        sample = await backend.run_workflow(request())
    assert get_rollout_context() is None
    assert sample is not None and sample.messages[0]["content"] == "from the source"


async def test_a_workflow_returning_something_else_is_a_type_error() -> None:
    class Wrong(AgentWorkflow[AgentWorkflowConfig]):
        async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> Any:
            return {"messages": []}

    with pytest.raises(TypeError, match="returned dict"):
        await LocalBackend(workflow=Wrong).run_workflow(request())


async def test_each_rollout_gets_its_own_copy_of_the_config() -> None:
    seen: list[AgentWorkflowConfig] = []

    class Mutates(AgentWorkflow[AgentWorkflowConfig]):
        async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> Any:
            assert ctx.config is not None and self.config is ctx.config
            seen.append(ctx.config)
            ctx.config.name = "changed"
            return AgentWorkflowOutput(messages=ctx.prompt, metrics={"turns": 1.0})

    config = AgentWorkflowConfig(name="cfg", concurrency=ConcurrencyConfig(max_concurrent=2))
    backend = LocalBackend(workflow=Mutates, workflow_config=config)
    sample = await backend.run_workflow(request())
    await backend.run_workflow(request())
    assert config.name == "cfg" and seen[0] is not seen[1]
    assert sample is not None and sample.metrics == {"turns": 1.0}
    assert backend.max_concurrent == 2
    assert LocalBackend(workflow=Answer).max_concurrent == 4
    assert LocalBackend(workflow=Answer, workflow_config=AgentWorkflowConfig(name="n")).max_concurrent is None


def test_the_backend_resolves_module_attr_strings_and_refuses_other_classes() -> None:
    backend = LocalBackend(workflow=f"{__name__}:Answer", grader=f"{__name__}:Exact")
    assert backend.workflow_cls is Answer and backend.grader_cls is Exact
    with pytest.raises(TypeError, match="AgentWorkflow subclass"):
        LocalBackend(workflow=Exact)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Grader subclass"):
        LocalBackend(workflow=Answer, grader=Answer)  # type: ignore[arg-type]


def test_the_0_3_modules_import_neither_fastapi_nor_litellm_nor_an_agent_framework() -> None:
    code = (
        "import sys\n"
        "import osmosis_ai.rollout.agent_workflow, osmosis_ai.rollout.grader, osmosis_ai.rollout.context\n"
        "import osmosis_ai.rollout.backend.local, osmosis_ai.rollout.types, osmosis_ai.eval.rubric\n"
        "import osmosis_ai.rollout.server, osmosis_ai.rollout.integrations.agents\n"
        "print(sorted({'fastapi', 'uvicorn', 'litellm', 'httpx', 'agents', 'strands'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [("openai_agents", "agents", "openai-agents"), ("strands", "strands", "strands")],
)
def test_an_adapter_without_its_framework_names_the_extra(module: str, framework: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        f"import osmosis_ai.rollout.integrations.agents.{module}\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.returncode != 0
    assert f"pip install 'osmosis-ai[{extra}]'" in ran.stderr.strip().splitlines()[-1]
