"""verl's agent loop against rollout servers driven through TrainGate: verl's real AgentLoopBase and
AgentLoopOutput, built as verl's worker builds an agent loop (hydra from an agent_loop_config_path
entry), a stand-in for verl's server manager answering generate() from a script; an agent served
in-process (0.2's wire) and a 0.3 server. The advantages go through verl's own compute_advantage."""

from __future__ import annotations

import asyncio
import logging
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.server import create_rollout_server
from tests.support.server import RunningServer
from tests.train.agents import LabelGrader, TwoTurnAgent, TwoTurnWorkflow

pytestmark = [pytest.mark.xdist_group("trl"), pytest.mark.usefixtures("verl")]

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "4 + 15"}}</tool_call>'
ANSWER = "The answer is 19."
TOOL_TURN = "\n<|im_start|>user\n<tool_response>19</tool_response><|im_end|>\n<|im_start|>assistant\n"
SAMPLING = {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
AGENT = f"{TwoTurnAgent.__module__}:TwoTurnAgent"


@pytest.fixture(scope="module")
def verl() -> Any:
    """The adapter with verl's classes, imported when these tests run (not when the suite is collected)."""
    with warnings.catch_warnings():
        # verl reports each optional training engine it cannot import (megatron, torchtitan) as a UserWarning.
        warnings.simplefilter("ignore", UserWarning)
        import osmosis_ai.train.verl as module

        module.OsmosisAgentLoop  # noqa: B018  (built on first access, with verl's trainer)
    return module


class ServerManager:
    """Stands in for verl's server manager: calls the calculator on the first turn, answers on the
    second, a log-probability of -0.5 per token; keeps every call."""

    def __init__(self, model_dir: Path) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.calls: list[dict[str, Any]] = []

    def ids(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False))

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        first = self.tokenizer.decode(prompt_ids).count("<|im_start|>assistant") == 1
        ids = self.ids(CALL if first else ANSWER)
        self.calls.append(
            {"request_id": request_id, "prompt_ids": list(prompt_ids), "params": sampling_params}
        )
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def agent_loop(
    model_dir: Path, manager: ServerManager, estimator: str = "osmosis_grpo", n: int = 3, **entry: Any
) -> Any:
    """The agent loop as verl's AgentLoopWorker instantiates an agent_loop_config_path entry."""
    import hydra
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"prompt_length": 512, "response_length": 256, "n": n},
                "model": {"path": str(model_dir)},
            },
            "algorithm": {"adv_estimator": estimator},
            "data": {},
        }
    )
    return hydra.utils.instantiate(
        config={"_target_": "osmosis_ai.train.verl.OsmosisAgentLoop", "name": "osmosis", **entry},
        trainer_config=DictConfigWrap(config),
        server_manager=manager,
        tokenizer=AutoTokenizer.from_pretrained(model_dir),
        processor=None,
        hf_model_type="qwen2",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


def fields(
    index: int, uid: str, *, reward: float = 1.0, fail: bool = False, label: str = "19"
) -> dict[str, Any]:
    """A verl row's fields, as RLHFDataset gives them to AgentLoopBase.run."""
    return {
        "raw_prompt": [
            {"role": "system", "content": "Use the calculator."},
            {"role": "user", "content": f"What is {index} + 15?"},
        ],
        "reward_model": {"style": "rule", "ground_truth": label},
        "extra_info": {"reward": reward, "fail": fail},
        "data_source": "calculator",
        "index": index,
        "uid": uid,
    }


async def run_all(loop: Any, rows: list[dict[str, Any]], sampling: dict[str, Any] = SAMPLING) -> list[Any]:
    return list(await asyncio.gather(*(loop.run(dict(sampling), **row) for row in rows)))


def test_the_agent_loop_trains_on_the_ids_trainGate_recorded(tiny_model: Path) -> None:
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, _agent_loop_registry

    manager = ServerManager(tiny_model)
    loop = agent_loop(tiny_model, manager, agent=AGENT)
    assert _agent_loop_registry["osmosis"]["_target_"] == "osmosis_ai.train.verl.OsmosisAgentLoop"

    (output,) = asyncio.run(run_all(loop, [fields(4, "u0", reward=0.75)]))
    assert isinstance(output, AgentLoopOutput)
    call, answer = manager.ids(CALL), manager.ids(ANSWER)
    between = output.response_ids[len(call) : -len(answer)]
    assert output.response_ids == call + between + answer
    assert loop.tokenizer.decode(between) == TOOL_TURN
    assert output.response_mask == [1] * len(call) + [0] * len(between) + [1] * len(answer)
    assert output.response_logprobs == [-0.5 if bit else 0.0 for bit in output.response_mask]
    assert loop.tokenizer.decode(output.prompt_ids).endswith(
        "What is 4 + 15?<|im_end|>\n<|im_start|>assistant\n"
    )
    # Each turn was generated from exactly the ids trained on, under one request id, with verl's sampling.
    first, second = manager.calls
    assert first["prompt_ids"] == output.prompt_ids
    assert second["prompt_ids"] == output.prompt_ids + output.response_ids[: -len(answer)]
    assert first["request_id"] == second["request_id"]
    assert first["params"]["temperature"] == 0.7 and first["params"]["logprobs"] is True
    assert (output.reward_score, output.num_turns) == (0.75, 4)
    assert output.extra_fields["osmosis_outcome"] == "completed" and output.extra_fields["osmosis_trainable"]
    # What verl's v1 worker stores: the reward on the last response token.
    stored = output.as_dict()
    assert stored["rm_scores"].tolist() == [0.0] * (len(output.response_ids) - 1) + [0.75]


@pytest.mark.parametrize("served", ["server", "in-process"])
def test_the_agent_loop_drives_a_0_3_workflow(tiny_model: Path, served: str) -> None:
    """A 0.3 server at a url, or the same workflow and grader named in the agent-loop entry."""
    manager = ServerManager(tiny_model)
    rows = [fields(1, "u0", label="1"), fields(2, "u1", label="0.5")]
    if served == "in-process":
        module = TwoTurnWorkflow.__module__
        loop = agent_loop(
            tiny_model, manager, agent=f"{module}:TwoTurnWorkflow", grader=f"{module}:LabelGrader"
        )
        outputs = asyncio.run(run_all(loop, rows))
    else:
        app = create_rollout_server(
            backend=LocalBackend(workflow=TwoTurnWorkflow, grader=LabelGrader), configure_logging=False
        )
        server = RunningServer(app).start()
        try:
            outputs = asyncio.run(run_all(agent_loop(tiny_model, manager, url=server.url), rows))
        finally:
            server.stop()
    assert [o.reward_score for o in outputs] == [1.0, 0.5]
    for output in outputs:
        generated = [t for t, bit in zip(output.response_ids, output.response_mask, strict=True) if bit]
        assert generated == manager.ids(CALL) + manager.ids(ANSWER)
        assert 0 in output.response_mask and output.extra_fields["osmosis_outcome"] == "completed"


def agent_loop_worker(model_dir: Path, tmp_path: Path, manager: ServerManager, **entry: Any) -> Any:
    """verl's own (Ray-less) agent loop worker over verl's default trainer configuration, the agent
    loop named by an agent_loop_config_path file."""
    import verl
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    loops = tmp_path / "agent_loops.yaml"
    OmegaConf.save(
        OmegaConf.create(
            [{"name": "osmosis", "_target_": "osmosis_ai.train.verl.OsmosisAgentLoop", **entry}]
        ),
        loops,
    )
    defaults = OmegaConf.load(
        Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    )
    rollout = {
        "name": "vllm", "n": 3, "prompt_length": 512, "response_length": 256,
        "agent": {"agent_loop_config_path": str(loops), "default_agent_loop": "osmosis"},
    }  # fmt: skip
    overrides = {"actor_rollout_ref": {"model": {"path": str(model_dir)}, "rollout": rollout},
                 "algorithm": {"adv_estimator": "osmosis_grpo"}}  # fmt: skip
    return AgentLoopWorker(OmegaConf.merge(defaults, overrides), manager)


def test_a_failed_rollout_stays_out_of_its_groups_advantages(
    tiny_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    import torch
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.trainer.ppo.ray_trainer import compute_advantage

    monkeypatch.setitem(
        _agent_loop_registry, "osmosis", _agent_loop_registry["osmosis"]
    )  # the worker replaces it
    worker = agent_loop_worker(tiny_model, tmp_path, ServerManager(tiny_model), agent=AGENT)
    rows = [
        fields(0, "a", reward=1.0),
        fields(0, "a", reward=0.5),
        fields(0, "a", fail=True),
        fields(1, "b", reward=0.25),
        fields(1, "b", fail=True),
    ]
    columns = {}
    for key in rows[0]:
        columns[key] = np.empty(len(rows), dtype=object)
        columns[key][:] = [row[key] for row in rows]
    batch = asyncio.run(worker.generate_sequences(DataProto.from_dict(non_tensors=columns)))

    mask = batch.batch["response_mask"]
    scores = batch.batch["rm_scores"].sum(dim=-1)
    assert list(batch.non_tensor_batch["osmosis_outcome"]) == [
        "completed",
        "completed",
        "agent_error",
        "completed",
        "agent_error",
    ]
    for failed in (2, 4):
        assert not mask[failed].any() and math.isnan(scores[failed].item())
        assert "broke on purpose" in batch.non_tensor_batch["osmosis_error"][failed]
        assert batch.non_tensor_batch["osmosis_trainable"][failed] is False
    assert scores[[0, 1, 3]].tolist() == [1.0, 0.5, 0.25]

    # The batch through verl's own compute_advantage, as its trainer calls it.
    batch.batch["token_level_rewards"] = batch.batch["rm_scores"]
    with caplog.at_level(logging.WARNING, logger="osmosis_ai.train.verl"):
        advantages = compute_advantage(batch, adv_estimator="osmosis_grpo", config=AlgoConfig()).batch[
            "advantages"
        ]
    assert torch.isfinite(advantages).all()
    per_row = [advantages[i][mask[i].bool()] for i in range(len(rows))]
    # Group a's baseline is its two scored rollouts' mean (0.75): +-0.25 over their std.
    spread = torch.tensor([1.0, 0.5]).std().item() + 1e-6
    assert per_row[0].tolist() == pytest.approx([0.25 / spread] * len(per_row[0]))
    assert per_row[1].tolist() == pytest.approx([-0.25 / spread] * len(per_row[1]))
    # Nothing of a failure is trained on; group b kept one scored rollout: no baseline, no advantage.
    assert not advantages[2].any() and not advantages[3].any() and not advantages[4].any()
    assert (
        "3 of 5 rollouts left out of the advantages (2 typed failures, 1 alone in their group)" in caplog.text
    )
    # Scored 0 instead, the failure would have pulled group a's mean to 0.5 and moved its advantages.
    rewards = torch.nan_to_num(batch.batch["rm_scores"][:3], nan=0.0)
    zeroed, _ = compute_grpo_outcome_advantage(rewards, mask[:3], batch.non_tensor_batch["uid"][:3])
    assert zeroed[0][mask[0].bool()][0].item() != pytest.approx(per_row[0][0].item())


class ModelServer(ServerManager):
    """Stands in for verl's server manager with the tiny model itself (in a worker thread: a model
    server is not on the caller's event loop): sampled ids and their log-probabilities, at most 8 a
    turn; keeps every call with what it generated."""

    def __init__(self, model_dir: Path) -> None:
        from transformers import AutoModelForCausalLM

        super().__init__(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir)

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        call = {"request_id": request_id, "prompt_ids": list(prompt_ids), "params": sampling_params}
        self.calls.append(call)
        limit = min(8, sampling_params.get("max_tokens", 8))
        ids, logprobs = await asyncio.to_thread(
            self.sample, prompt_ids, sampling_params["temperature"], limit
        )
        call.update(ids=ids, logprobs=logprobs)
        return TokenOutput(token_ids=ids, log_probs=logprobs)

    def sample(self, prompt_ids: list[int], temperature: float, limit: int) -> tuple[list[int], list[float]]:
        import torch

        inputs = torch.tensor([prompt_ids])
        with torch.no_grad():
            out = self.model.generate(
                input_ids=inputs, attention_mask=torch.ones_like(inputs), do_sample=True, temperature=temperature,
                max_new_tokens=limit, output_scores=True, return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id,
            )  # fmt: skip
        ids = out.sequences[0, len(prompt_ids) :].tolist()
        scores = [torch.log_softmax(score[0], dim=-1) for score in out.scores]
        return ids, [score[token].item() for score, token in zip(scores, ids, strict=True)]


def test_the_ids_a_real_model_generated_are_the_ids_trained_on(tiny_model: Path) -> None:
    import torch

    torch.manual_seed(0)
    manager = ModelServer(tiny_model)
    loop = agent_loop(tiny_model, manager, agent=AGENT)
    outputs = asyncio.run(run_all(loop, [fields(0, "a", reward=0.5), fields(1, "a", reward=1.0)]))
    for output in outputs:
        assert output.extra_fields["osmosis_trainable"], output.extra_fields["osmosis_error"]
        calls = [c for c in manager.calls if c["prompt_ids"][: len(output.prompt_ids)] == output.prompt_ids]
        (first, first_lp), (final, final_lp) = ((c["ids"], c["logprobs"]) for c in calls)
        between = output.response_ids[len(first) : len(output.response_ids) - len(final)]
        # Whatever the model wrote, however it would re-tokenize, is trained on as generated.
        assert output.response_ids == first + between + final
        assert output.response_mask == [1] * len(first) + [0] * len(between) + [1] * len(final)
        assert output.response_logprobs == first_lp + [0.0] * len(between) + final_lp
    assert sorted(o.reward_score for o in outputs) == [0.5, 1.0]


class HeldServer(ServerManager):
    """``ServerManager`` holding the first turn of the row asking about 0 until ``release`` is set."""

    def __init__(self, model_dir: Path) -> None:
        super().__init__(model_dir)
        self.held, self.release = asyncio.Event(), asyncio.Event()

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        text = self.tokenizer.decode(prompt_ids)
        if "What is 0 + 15?" in text and text.count("<|im_start|>assistant") == 1:
            self.held.set()
            await self.release.wait()
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)


def test_a_rollout_ending_leaves_the_others_of_its_worker_running(tiny_model: Path) -> None:
    """verl runs a worker's agent loops side by side in one event loop, each ending on its own: one
    ends (its whole rollout) while another's chat call is in flight."""
    from osmosis_ai import _http

    manager = HeldServer(tiny_model)
    loop = agent_loop(tiny_model, manager, agent=AGENT)

    async def overlapping() -> tuple[Any, Any]:
        held = asyncio.create_task(loop.run(dict(SAMPLING), **fields(0, "u", reward=0.5)))
        await manager.held.wait()
        ended = await loop.run(dict(SAMPLING), **fields(1, "u", reward=1.0))
        # What the held rollout's requests go through is still open: the loop's shared HTTP pools.
        running = asyncio.get_running_loop()
        assert [key for key, pool in _http._pools.items() if key[0] is running and not pool.closed]
        manager.release.set()
        return await held, ended

    held, ended = asyncio.run(overlapping())
    assert (held.extra_fields["osmosis_error"], ended.extra_fields["osmosis_error"]) == (None, None)
    assert (held.reward_score, ended.reward_score) == (0.5, 1.0)


def test_a_workers_rollouts_share_one_gateway_closed_with_its_event_loop(tiny_model: Path, verl: Any) -> None:
    """verl builds an agent loop per row; a worker's rollouts, side by side and one after another, go
    through one gateway (and one served agent), each sampled with its own parameters; the worker's
    event loop shutting down closes it."""
    import socket

    manager = ServerManager(tiny_model)

    async def rollouts() -> tuple[list[Any], list[Any]]:
        cold = await run_all(agent_loop(tiny_model, manager, agent=AGENT), [fields(0, "a")])
        warm = await asyncio.gather(*(
            agent_loop(tiny_model, manager, agent=AGENT).run({**SAMPLING, "temperature": t}, **fields(i, "b"))
            for i, t in ((1, 0.25), (2, 0.5), (3, 0.75))
        ))  # fmt: skip
        running = asyncio.get_running_loop()
        return [*cold, *warm], [
            opened.result() for key, opened in verl._collectors.items() if key[0] is running
        ]

    outputs, (collector,) = asyncio.run(rollouts())
    assert [o.extra_fields["osmosis_error"] for o in outputs] == [None] * 4
    assert all(o.reward_score == 1.0 for o in outputs)
    by_request: dict[str, set[float]] = {}
    for call in manager.calls:
        by_request.setdefault(call["request_id"], set()).add(call["params"]["temperature"])
    assert sorted(by_request.values(), key=min) == [{0.25}, {0.5}, {0.7}, {0.75}]
    assert collector.gate is not None and not collector.gate.sessions  # each batch's sessions forgotten
    with pytest.raises(OSError):
        socket.create_connection((collector.gate.host, collector.gate.port), timeout=5).close()


def test_a_server_that_does_not_answer_fails_the_rollout_and_the_next_one_asks_again(
    tiny_model: Path,
) -> None:
    """The worker's collector did not open (nothing listens at the url yet): that rollout raises, as
    verl expects of a failed session, and the next one opens it."""
    import socket

    from osmosis_ai.traingate.launcher import ServerUnreachable

    app = create_rollout_server(
        backend=LocalBackend(workflow=TwoTurnWorkflow, grader=LabelGrader), configure_logging=False
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # its port, not yet listening: connections are refused
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    manager = ServerManager(tiny_model)

    async def rollouts() -> Any:
        with pytest.raises(ServerUnreachable):
            await agent_loop(tiny_model, manager, url=url).run(dict(SAMPLING), **fields(1, "u", label="1"))
        server = RunningServer(app, sock=sock).start()
        try:
            return await agent_loop(tiny_model, manager, url=url).run(
                dict(SAMPLING), **fields(1, "u", label="1")
            )
        finally:
            server.stop()

    output = asyncio.run(rollouts())
    assert output.reward_score == 1.0 and output.extra_fields["osmosis_trainable"]


def test_without_log_probabilities_none_are_returned(tiny_model: Path) -> None:
    manager = ServerManager(tiny_model)
    loop = agent_loop(tiny_model, manager, agent=AGENT)
    ok, failed = asyncio.run(
        run_all(loop, [fields(0, "a"), fields(1, "a", fail=True)], sampling={**SAMPLING, "logprobs": False})
    )
    assert ok.response_logprobs is None and failed.response_logprobs is None and ok.reward_score == 1.0


def test_the_agent_loop_refuses_what_it_cannot_train_honestly(tiny_model: Path) -> None:
    from hydra.errors import InstantiationException

    from osmosis_ai.train.verl import row_of

    manager = ServerManager(tiny_model)
    with pytest.raises(InstantiationException, match="set it to 'osmosis_grpo'"):
        agent_loop(tiny_model, manager, estimator="grpo", agent=AGENT)
    with pytest.raises(InstantiationException, match="at least 2 rollouts per prompt"):
        agent_loop(tiny_model, manager, n=1, agent=AGENT)
    with pytest.raises(InstantiationException, match="exactly one of url"):
        agent_loop(tiny_model, manager, agent=AGENT, url="http://127.0.0.1:1")
    with pytest.raises(InstantiationException, match="not a local model directory"):
        agent_loop(tiny_model, manager, agent=AGENT, tokenizer_dir=str(tiny_model / "absent"))
    row = fields(3, "a")
    assert row_of(row) == {
        "system_prompt": "Use the calculator.",
        "user_prompt": "What is 3 + 15?",
        "ground_truth": "19",
        "reward": 1.0,
        "fail": False,
    }
    import numpy as np

    column = np.empty(2, dtype=object)
    column[:] = row["raw_prompt"]
    assert row_of({**row, "raw_prompt": column}) == row_of(row)
    with pytest.raises(ValueError, match="optional system message and one user message"):
        row_of({**row, "raw_prompt": [*row["raw_prompt"], {"role": "user", "content": "again"}]})
    with pytest.raises(ValueError, match="has no ground truth"):
        row_of({**row, "reward_model": {}})


DRIVER = """
import sys, warnings
sys.modules["kernels"] = None  # as tests/train/conftest.py: the venv's kernels is older than transformers expects
warnings.simplefilter("ignore")
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.v1 import AgentLoopManagerTQ
from verl.utils.import_utils import load_class_from_fqn

before = "osmosis_grpo" in core_algos.ADV_ESTIMATOR_REGISTRY
manager = load_class_from_fqn("osmosis_ai.train.verl.OsmosisAgentLoopManager", "AgentLoopManager")
print(before, issubclass(manager, AgentLoopManagerTQ), core_algos.get_adv_estimator_fn("osmosis_grpo").__name__)
"""


def test_naming_the_manager_registers_the_estimator_in_a_fresh_driver_process() -> None:
    import subprocess
    import sys

    from tests.support.cli import subprocess_env

    # verl's driver imports only what its configuration names: the manager class, loaded as verl loads it.
    ran = subprocess.run(
        [sys.executable, "-c", DRIVER], env=subprocess_env(), capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split() == ["False", "True", "osmosis_grpo_advantage"]


def test_a_collector_that_cannot_be_made_fails_its_rollout_and_the_next_one_makes_it(verl: Any) -> None:
    """Making the worker's collector raised (its target could not be built): that rollout raises, and
    the next one makes its own rather than wait for the first one's forever."""

    class Opened:  # what the worker's collector is to `_worker_collector`: entered, held, left
        async def __aenter__(self) -> Opened:
            return self

        async def __aexit__(self, *exc_info: object) -> None:
            return None

    def broken() -> Any:
        raise ValueError("no target")

    async def rollouts() -> Any:
        settings = ("a-worker-collector-that-failed-to-be-made",)
        with pytest.raises(ValueError, match="no target"):
            await verl._worker_collector(settings, broken)
        # the bound only ends a failing test
        return await asyncio.wait_for(verl._worker_collector(settings, Opened), 30)

    assert isinstance(asyncio.run(rollouts()), Opened)
