"""TRL's real GRPOTrainer training the tiny local model on rollout servers driven through TrainGate: an
agent served by this package (0.2's wire) and a 0.3 server. A few steps each on the CPU."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.train.rollouts import Limits, Target
from tests.support.server import RunningServer
from tests.train.agents import NUDGE, LabelGrader, TwoTurnAgent, TwoTurnWorkflow

pytestmark = pytest.mark.xdist_group("trl")

GROUP = 4


class Recording:
    """``OsmosisRollouts`` keeping what it returned to the trainer, and a reward function keeping what it got."""

    def __init__(self, rollouts: Any) -> None:
        self.rollouts = rollouts
        self.outputs: list[dict[str, Any]] = []
        self.rewards: list[list[float | None]] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        output: dict[str, Any] = self.rollouts(prompts, trainer)
        self.outputs.append({**output, "prompts": prompts})
        return output

    def reward(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        from osmosis_ai.train.trl import server_reward

        rewards = server_reward(prompts, completions, **kwargs)
        self.rewards.append(rewards)
        return rewards


def train(
    model_dir: Path, tmp_path: Path, target: Target, rows: list[dict[str, Any]], steps: int = 2
) -> tuple[Any, Recording]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from osmosis_ai.train.trl import OsmosisRollouts, prompt_of

    recording = Recording(
        OsmosisRollouts(target, dataset=rows, tokenizer=model_dir, limits=Limits(timeout=60))
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=2 * GROUP, num_generations=GROUP,
        max_steps=steps, max_completion_length=6, learning_rate=1e-2, logging_steps=1, report_to=[],
        use_cpu=True, save_strategy="no", beta=0.0, seed=0, shuffle_dataset=False,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        reward_funcs=[recording.reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": prompt_of(row)} for row in rows]),
        rollout_func=recording,
    )
    trainer.train()
    return trainer, recording


def rows(*rewards: float, fail: int | None = None) -> list[dict[str, Any]]:
    return [
        {"system_prompt": "Use the calculator.", "user_prompt": f"What is {i} + 15?", "ground_truth": "19",
         "reward": reward, "fail": fail}
        for i, reward in enumerate(rewards)
    ]  # fmt: skip


def losses(trainer: Any) -> list[float]:
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def test_grpo_trains_an_in_process_agent_on_the_ids_trainGate_recorded(
    tiny_model: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    agent = TwoTurnAgent(spread=0.5)  # rewards differ within a group: there is something to learn
    data = rows(1.0, 0.5, 0.25, 0.0)
    trainer, recording = train(tiny_model, tmp_path, Target(agent=agent), data)
    assert len(losses(trainer)) == 2 and all(math.isfinite(loss) for loss in losses(trainer))
    assert all(entry["grad_norm"] > 0 for entry in trainer.state.log_history if "loss" in entry)
    assert len(recording.outputs) == 2
    for output, rewards in zip(recording.outputs, recording.rewards, strict=True):
        want = [
            next(r["reward"] for r in data if r["user_prompt"] in p[-1]["content"]) + 0.5 * (i % 2)
            for i, p in enumerate(output["prompts"])
        ]
        assert rewards == want  # the server's reward, row by row, reached the reward function
        assert output["logprobs"] is None
    assert [entry["osmosis/excluded_frac"] for entry in trainer.state.log_history if "loss" in entry] == [
        0.0,
        0.0,
    ]
    # Token-exact: the ids trained on are those the gateway answered each turn (the agent kept them
    # from the last step), the environment's tokens between the turns masked out.
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    output = recording.outputs[-1]
    assert sorted(agent.seen) == list(range(2 * GROUP))
    for index, (completion, mask) in enumerate(
        zip(output["completion_ids"], output["env_mask"], strict=True)
    ):
        first, final = agent.seen[index]
        between = completion[len(first) : len(completion) - len(final)]
        assert completion == first + between + final
        assert mask == [1] * len(first) + [0] * len(between) + [1] * len(final)
        assert tokenizer.decode(between) == f"\n<|im_start|>user\n{NUDGE}<|im_end|>\n<|im_start|>assistant\n"
        assert tokenizer.decode(output["prompt_ids"][index]).endswith(
            "+ 15?<|im_end|>\n<|im_start|>assistant\n"
        )


def test_a_failing_rollout_is_excluded_and_leaves_its_groups_mean_alone(
    tiny_model: Path, tmp_path: Path
) -> None:
    # One rollout of every group of four fails (the agent raises): excluded, not scored 0.
    data = rows(1.0, 0.5, fail=1)
    trainer, recording = train(
        tiny_model, tmp_path, Target(agent=TwoTurnAgent(fail_every=GROUP)), data, steps=1
    )
    (rewards,) = recording.rewards
    assert [r is None for r in rewards] == [i % GROUP == 1 for i in range(2 * GROUP)]
    (output,) = recording.outputs
    assert output["osmosis_outcome"] == [
        "agent_error" if i % GROUP == 1 else "completed" for i in range(2 * GROUP)
    ]
    # Nothing of an excluded rollout is trained on: its tokens are all masked out.
    assert [1 in mask for mask in output["env_mask"]] == [i % GROUP != 1 for i in range(2 * GROUP)]
    (logged,) = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert logged["osmosis/excluded_frac"] == 0.25
    # Each group's mean is its row's reward; scored 0, the failures would have pulled it to 3/4 of that.
    assert logged["reward"] == pytest.approx((1.0 + 0.5) / 2)
    assert math.isfinite(logged["loss"])


def test_grpo_trains_a_0_3_server(tiny_model: Path, tmp_path: Path) -> None:
    app = create_rollout_server(
        backend=LocalBackend(workflow=TwoTurnWorkflow, grader=LabelGrader), configure_logging=False
    )
    data = [
        {"user_prompt": f"What is {i} + 15?", "ground_truth": label} for i, label in enumerate(["1", "0.5"])
    ]
    server = RunningServer(app).start()
    try:
        trainer, recording = train(tiny_model, tmp_path, Target(url=server.url), data)
    finally:
        server.stop()
    assert all(math.isfinite(loss) for loss in losses(trainer)) and len(losses(trainer)) == 2
    for output, rewards in zip(recording.outputs, recording.rewards, strict=True):
        want = [1.0 if "0 + 15" in p[-1]["content"] else 0.5 for p in output["prompts"]]
        assert rewards == want
        for completion, mask in zip(output["completion_ids"], output["env_mask"], strict=True):
            assert len(completion) == len(mask) and 0 in mask and mask[0] == 1 and mask[-1] == 1


def test_rows_trl_cannot_tell_apart_are_refused(tiny_model: Path) -> None:
    from osmosis_ai.train.trl import OsmosisRollouts

    same = {"user_prompt": "What is 1 + 1?", "ground_truth": "2"}
    OsmosisRollouts(Target(agent=TwoTurnAgent()), dataset=[same, dict(same)], tokenizer=tiny_model)
    with pytest.raises(ValueError, match="rows 0 and 1 have the same prompt but differ"):
        OsmosisRollouts(
            Target(agent=TwoTurnAgent()), dataset=[same, {**same, "ground_truth": "3"}], tokenizer=tiny_model
        )


def test_a_prompt_is_mapped_back_to_its_row_even_with_the_nulls_a_dataset_adds(tiny_model: Path) -> None:
    from osmosis_ai.train.trl import OsmosisRollouts, prompt_of

    data = rows(1.0, 0.5)
    rollouts = OsmosisRollouts(Target(agent=TwoTurnAgent()), dataset=data, tokenizer=tiny_model)
    padded = [{**message, "tool_calls": None} for message in prompt_of(data[1])]
    assert rollouts.row_of(padded) is data[1]
    with pytest.raises(ValueError, match="a prompt TRL passed is in no row of the dataset"):
        rollouts.row_of([{"role": "user", "content": "What is 7 + 15?"}])


def vllm_trainer(
    model_dir: Path, tmp_path: Path, client: Any, mode: str = "server", processes: int = 1
) -> Any:
    """What ``OsmosisRollouts`` reads of a ``GRPOTrainer`` built with ``use_vllm=True``: its arguments,
    tokenizer, model, process, group size, metrics and TRL's client to the server. The trainer itself
    cannot be built here: TRL refuses ``use_vllm`` where the vllm package is not installed, and vLLM
    needs an accelerator."""
    from collections import defaultdict
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_vllm=True, vllm_mode=mode, num_generations=2,
                      per_device_train_batch_size=4, max_completion_length=6, temperature=0.9, use_cpu=True,
                      report_to=[])  # fmt: skip
    return SimpleNamespace(
        args=args, use_vllm=True, vllm_mode=mode, vllm_generation=SimpleNamespace(vllm_client=client),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        model=AutoModelForCausalLM.from_pretrained(model_dir).train(), accelerator=SimpleNamespace(process_index=0, num_processes=processes),
        num_generations=2, num_generations_eval=2, _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )  # fmt: skip


def test_trls_vllm_server_generates_the_ids_trained_on_with_their_log_probabilities(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's own VLLMClient over HTTP to a stand-in of vLLM's server sampling with the tiny model: each
    turn generated from the ids TrainGate recorded, the sampled ids and log-probabilities trained on."""
    import trl.generation.vllm_client as vllm_client

    from osmosis_ai.train.trl import REWARD_KEY, OsmosisRollouts, prompt_of
    from tests.train.vllm_server import vllm_app

    # The client speaks plain HTTP; it only checks for the vllm package (a GPU install) before it starts.
    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *args, **kwargs: True)
    app = vllm_app(tiny_model)
    server = RunningServer(app).start()
    agent, data = TwoTurnAgent(), rows(1.0, 0.5)
    try:
        trainer = vllm_trainer(tiny_model, tmp_path, vllm_client.VLLMClient(base_url=server.url))
        rollouts = OsmosisRollouts(
            Target(agent=agent), dataset=data, tokenizer=tiny_model, limits=Limits(timeout=60)
        )
        output = rollouts([prompt_of(row) for row in data for _ in range(2)], trainer)
    finally:
        server.stop()
    assert output[REWARD_KEY] == [1.0, 1.0, 0.5, 0.5] and output["osmosis_error"] == [None] * 4
    assert trainer._metrics["train"]["osmosis/excluded_frac"] == [0.0]
    calls = app.state.calls
    assert len(calls) == 8 and all(
        c["body"]["temperature"] == 0.9 and c["body"]["logprobs"] == 0 for c in calls
    )
    for index, (prompt, completion, mask, logprobs) in enumerate(
        zip(
            output["prompt_ids"],
            output["completion_ids"],
            output["env_mask"],
            output["logprobs"],
            strict=True,
        )
    ):
        first, final = agent.seen[index]
        between = len(completion) - len(first) - len(final)
        assert completion == first + completion[len(first) : len(first) + between] + final
        assert mask == [1] * len(first) + [0] * between + [1] * len(final)
        # Each turn was generated from exactly the ids trained on, and its log-probabilities came back.
        (turn1,) = [c for c in calls if c["prompt_ids"] == prompt and c["ids"] == first]
        (turn2,) = [c for c in calls if c["prompt_ids"] == prompt + completion[: len(first) + between]]
        assert turn2["ids"] == final
        assert logprobs == turn1["logprobs"] + [0.0] * between + turn2["logprobs"]


def test_trls_vllm_is_driven_in_server_mode_from_one_process_only(tiny_model: Path, tmp_path: Path) -> None:
    from osmosis_ai.train.trl import OsmosisRollouts, prompt_of

    data = rows(1.0)
    rollouts = OsmosisRollouts(Target(agent=TwoTurnAgent()), dataset=data, tokenizer=tiny_model)
    with pytest.raises(ValueError, match="server mode only, not vllm_mode='colocate'"):
        rollouts([prompt_of(data[0])] * 2, vllm_trainer(tiny_model, tmp_path, None, mode="colocate"))
    # TRL gives the server's client to the main process only: every process of a run of several is
    # refused, the main one (which has the client) too, so none goes on to wait for the others.
    with pytest.raises(ValueError, match="runs in one training process"):
        rollouts([prompt_of(data[0])] * 2, vllm_trainer(tiny_model, tmp_path, None, processes=2))
    with pytest.raises(ValueError, match="runs in one training process"):
        rollouts([prompt_of(data[0])] * 2, vllm_trainer(tiny_model, tmp_path, object(), processes=2))
