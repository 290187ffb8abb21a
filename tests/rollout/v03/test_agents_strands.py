"""0.3's Strands adapter (``osmosis_ai.rollout.integrations.agents.strands``) with the real Strands
Agents: an ``OsmosisStrandsAgent`` with one tool, made inside ``AgentWorkflow.run`` as a 0.3 user
writes it, served by this package's 0.3 server; the policy stand-in asks for the tool, then answers.
Driven over 0.3's wire and by ``osmosis rollout run --url`` (the TrainGate recording token ids)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import RolloutContext
from tests.rollout.v03.adder import adding_policy, run_over_wire, run_through_traingate
from tests.support.openai_server import OpenAIServer
from tests.support.server import RunningServer


@pytest.fixture(scope="module")
def sdk() -> Any:
    """The workflow's module, with Strands Agents and the adapter's names."""
    return importlib.import_module("tests.rollout.v03.strands_workflow")


@pytest.fixture
def server(sdk: Any, serve03: Callable[..., RunningServer]) -> RunningServer:
    return serve03(LocalBackend(workflow=sdk.AddingWorkflow, grader=sdk.AnswerGrader))


def test_the_tool_call_and_its_result_are_the_rollouts_sample(
    server: RunningServer, openai_server: OpenAIServer
) -> None:
    openai_server.handler = adding_policy
    answer = run_over_wire(server.url, openai_server.url, "st-1", 3)
    assert answer["status"] == "success", answer
    sample = answer["sample"]
    assert sample["reward"] == 1.0
    messages = sample["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    (use,) = [block["toolUse"] for block in messages[1]["content"] if "toolUse" in block]
    (result,) = [block["toolResult"] for block in messages[2]["content"] if "toolResult" in block]
    assert (use["name"], use["input"], result["toolUseId"]) == ("add", {"a": 3, "b": 2}, use["toolUseId"])
    assert result["content"] == [{"text": "5"}]
    trajectory = sample["trajectory_messages"]
    assert [m["role"] for m in trajectory] == ["system", "user", "assistant", "tool", "assistant"]
    assert trajectory[2]["tool_calls"][0]["function"]["name"] == "add"
    first, second = openai_server.requests  # the model's two turns, at the rollout's endpoint with its key
    assert first.path == second.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer sk-rollout"
    assert [t["function"]["name"] for t in first.json["tools"]] == ["add"]
    assert second.json["messages"] == trajectory[:-1]  # what the model saw is the trajectory


def test_through_the_traingate_every_turn_has_token_ids_and_extends_the_last(
    server: RunningServer, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = adding_policy
    ran, records = run_through_traingate(server.url, openai_server.url, tmp_path)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    assert [r["row_index"] for r in records] == [0, 1, 2]
    for record in records:
        assert (record["outcome"], record["reward"]) == (
            "completed",
            1.0 if record["row_index"] % 2 == 0 else 0.0,
        )
        assert record["append_only_violations"] == [], [
            (v["expected"], v["actual"]) for v in record["append_only_violations"]
        ]
        assert record["rejected_calls"] == []
        assert len(record["turns"]) == 2
        assert all(turn["token_ids"] and turn["prompt_token_ids"] for turn in record["turns"])
        roles = [m["role"] for m in record["final_messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
    asked = [r.json for r in openai_server.requests if "what is" in str(r.json)]
    assert len(asked) == 6 and all([t["function"]["name"] for t in r["tools"]] == ["add"] for r in asked)


def test_the_rollouts_model_needs_a_rollout_and_one_agent_per_rollout(sdk: Any) -> None:
    with pytest.raises(RuntimeError, match="needs a running rollout"):
        sdk.OsmosisStrandsAgent(model=sdk.OsmosisRolloutModel(), callback_handler=None)
    with RolloutContext(chat_completions_url="http://127.0.0.1:9/v1", rollout_id="r") as rollout:
        agent = sdk.OsmosisStrandsAgent(
            model=sdk.OsmosisRolloutModel(params={"temperature": 0.5}), callback_handler=None
        )
        assert rollout.sample_source is not None
        config = agent.model.get_config()
        assert (config["model_id"], config["params"], config["stream"]) == (
            "litellm_proxy/osmosis-rollout",
            {"temperature": 0.5},
            False,
        )
        with pytest.raises(ValueError, match="already has a sample source"):
            sdk.OsmosisStrandsAgent(model=sdk.OsmosisRolloutModel(), callback_handler=None)
