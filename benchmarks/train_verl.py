"""verl's agent loop's cost per rollout: CPU and wall ms of a two-turn rollout with a scripted server manager.

Run: ``.venv/bin/python -m benchmarks.train_verl [--rollouts 32] [--concurrency 1 16] [--rounds 3]``

:class:`~osmosis_ai.train.verl.OsmosisAgentLoop` built as verl's worker builds it (hydra, from an
agent-loop entry naming the calculator agent, served in this process), the tiny model's tokenizer
(built offline), and a stand-in for verl's server manager answering from a script: a calculator tool
call on the first turn, the answer on the second, with log-probabilities. Nothing is generated, so the
figure is the adapter's own cost per rollout — the agent, TrainGate, the chat template, the token
trace — the same event loop running every round as verl's worker runs its loop, ``--concurrency``
rollouts side by side. Run it against two source trees to compare them (``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

CALL = '<tool_call>{"name": "add", "arguments": {"a": 12, "b": 7}}</tool_call>'
ANSWER = "#### 19"


class ScriptedServerManager:
    """verl's server manager's ``generate`` answered from the script (see the module docstring)."""

    def __init__(self, tokenizer: Any) -> None:
        self.call = tokenizer.encode(CALL + "<|im_end|>", add_special_tokens=False)
        self.answer = tokenizer.encode(ANSWER + "<|im_end|>", add_special_tokens=False)
        self.tool_turn = tokenizer.encode("<tool_response>", add_special_tokens=False)[-1]

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        ids = self.answer if self.tool_turn in prompt_ids else self.call
        return SimpleNamespace(token_ids=list(ids), log_probs=[-0.5] * len(ids))


def agent_loop(model_dir: Path, manager: ScriptedServerManager) -> Any:
    """The agent loop as verl's AgentLoopWorker instantiates an agent_loop_config_path entry."""
    import hydra
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 2048, "response_length": 512, "n": 4},
                              "model": {"path": str(model_dir)}},
        "algorithm": {"adv_estimator": "osmosis_grpo"}, "data": {},
    })  # fmt: skip
    entry = {"_target_": "osmosis_ai.train.verl.OsmosisAgentLoop", "name": "osmosis",
             "agent": "examples.calculator.agent:agent_loop", "max_turns": 2}  # fmt: skip
    return hydra.utils.instantiate(
        config=entry, trainer_config=DictConfigWrap(config), server_manager=manager,
        tokenizer=AutoTokenizer.from_pretrained(model_dir), processor=None, hf_model_type="qwen2",
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap([]),
    )  # fmt: skip


def verl_rows(count: int) -> list[dict[str, Any]]:
    """Calculator rows as verl's dataset hands them to the agent loop."""
    from benchmarks.train_adapter import rows

    return [
        {"raw_prompt": [{"role": "system", "content": row["system_prompt"]},
                        {"role": "user", "content": row["user_prompt"]}],
         "reward_model": {"ground_truth": row["ground_truth"]}, "extra_info": {}, "index": i}
        for i, row in enumerate(rows(count))
    ]  # fmt: skip


async def one_round(
    loop: Any, model_dir: Path, data: list[dict[str, Any]], concurrency: int
) -> tuple[float, float]:
    """CPU and wall seconds of the rollouts of ``data``, ``concurrency`` at a time (each a fresh agent
    loop, as verl builds one per row)."""
    manager = loop.server_manager
    sampling = {"temperature": 1.0, "top_p": 1.0, "logprobs": True}
    limit = asyncio.Semaphore(concurrency)

    async def rollout(row: dict[str, Any]) -> Any:
        async with limit:
            return await agent_loop(model_dir, manager).run(dict(sampling), **row)

    cpu, wall = time.process_time(), time.perf_counter()
    outputs = await asyncio.gather(*(rollout(row) for row in data))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    failed = [o.extra_fields["osmosis_error"] for o in outputs if not o.extra_fields["osmosis_trainable"]]
    if failed:
        raise SystemExit(f"a rollout failed: {failed[0]}")
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    import warnings

    from transformers import AutoTokenizer

    from osmosis_ai.train.tiny import build_tiny_model

    warnings.simplefilter("ignore", UserWarning)  # verl's notes on the training engines it lacks
    scratch = tempfile.TemporaryDirectory(prefix="bench-tiny-")  # removed as the process ends
    model_dir = build_tiny_model(Path(scratch.name))
    manager = ScriptedServerManager(AutoTokenizer.from_pretrained(model_dir))
    data = verl_rows(options.rollouts)

    async def measure() -> None:
        first = agent_loop(model_dir, manager)
        await one_round(first, model_dir, data[:2], 1)  # warm: imports, the agent served, the first render
        for concurrency in options.concurrency:
            cpu_ms, wall_ms = [], []
            for _ in range(options.rounds):
                cpu, wall = await one_round(first, model_dir, data, concurrency)
                cpu_ms.append(cpu / len(data) * 1000)
                wall_ms.append(wall / len(data) * 1000)
            print(f"concurrency {concurrency}: {statistics.median(cpu_ms):.1f} ms CPU, "
                  f"{statistics.median(wall_ms):.1f} ms wall per rollout (median of {options.rounds} rounds "
                  f"of {len(data)}; CPU {min(cpu_ms):.1f}-{max(cpu_ms):.1f})")  # fmt: skip

    asyncio.run(measure())


if __name__ == "__main__":
    main()
