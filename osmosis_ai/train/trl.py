"""TRL's ``GRPOTrainer`` training a rollout server: a ``rollout_func`` and the reward function it feeds.

``OsmosisRollouts(target, dataset=rows, tokenizer=model_dir)`` is called by the trainer as
``rollout_func(prompts, trainer)``: each prompt (already repeated once per generation) is mapped back
to its dataset row, every one becomes a rollout through the local TrainGate against ``target``
(:func:`~osmosis_ai.train.rollouts.collect_samples`), and the trainer's own model answers every chat
call from the token trace's prompt ids (``model.generate`` in a worker thread, one call at a time).
The returned ``prompt_ids``/``completion_ids`` are the ids TrainGate recorded, ``env_mask`` is 0 on
the tool and environment tokens between turns, ``logprobs`` is ``None`` (TRL computes the old
policy's log-probabilities itself), and ``osmosis_reward``/``osmosis_outcome``/``osmosis_error``
reach the reward functions. :func:`server_reward` returns the server's reward, and ``None`` for a
typed failure, which TRL keeps out of its group statistics with advantage 0; a group with fewer
than two scored rollouts left is excluded whole. The share excluded is logged to the trainer's
metrics as ``osmosis/excluded_frac`` (see docs/design/training.md).

TRL's vLLM generation is not driven from here: a trainer with ``use_vllm`` is refused.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.train.rollouts import Sample, Target, collect_samples
from osmosis_ai.traingate.policy.base import Generation, Message
from osmosis_ai.traingate.policy.tokens import TokenPolicy, assistant_message

if TYPE_CHECKING:
    from osmosis_ai.runs.rollouts import OnDone

__all__ = ["OsmosisRollouts", "TRLPolicy", "prompt_of", "server_reward"]

EXCLUDED_METRIC = "osmosis/excluded_frac"
REWARD_KEY = "osmosis_reward"
THIN_GROUP = "excluded: fewer than two rollouts of its group were scored"


def prompt_of(row: Mapping[str, Any]) -> list[Message]:
    """The conversational prompt of a dataset row: what the TRL dataset's ``prompt`` column holds."""
    from osmosis_ai.runs.executors.traingate import row_messages

    return row_messages(row)


def _key(prompt: Any) -> str:
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)


def server_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The rollout server's reward of each completion; ``None`` for a typed failure (excluded, never 0)."""
    rewards = kwargs.get(REWARD_KEY)
    if rewards is None:
        raise ValueError(
            f"server_reward needs the {REWARD_KEY!r} column: give GRPOTrainer rollout_func=OsmosisRollouts(...)"
        )
    return [None if value is None else float(value) for value in rewards]


class TRLPolicy(TokenPolicy):
    """The trainer's model generating from token ids, ``generate`` run in a worker thread, one at a time.

    Sampling follows the trainer's arguments (``temperature``, ``top_p``, ``top_k``); a chat call's
    ``max_tokens`` can only lower ``max_completion_length`` for its turn.
    """

    name = "trl"

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self._lock = threading.Lock()  # one generate at a time: the model is shared

    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        return await asyncio.to_thread(self._generate, prompt_ids, params)

    def _generate(self, prompt_ids: list[int], params: dict[str, Any]) -> Generation:
        import torch

        trainer, args = self.trainer, self.trainer.args
        tokenizer = trainer.processing_class
        limit = int(args.max_completion_length)
        if isinstance(params.get("max_tokens"), int) and params["max_tokens"] > 0:
            limit = min(limit, params["max_tokens"])
        model = trainer.accelerator.unwrap_model(trainer.model)
        inputs = torch.tensor([prompt_ids], device=model.device)
        with self._lock, torch.no_grad():
            output = model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                max_new_tokens=limit,
                do_sample=True,
                temperature=args.temperature,
                top_p=args.top_p,
                top_k=args.top_k or None,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        ids = [int(token) for token in output[0, len(prompt_ids) :].tolist()]
        eos = tokenizer.eos_token_id
        if eos in ids:  # what follows the end of turn is padding
            ids = ids[: ids.index(eos) + 1]
        text = tokenizer.decode(ids, skip_special_tokens=True)
        return Generation(
            assistant_message(text),
            finish_reason="stop" if ids and ids[-1] == eos else "length",
            token_ids=ids,
        )


class OsmosisRollouts:
    """TRL's ``rollout_func`` for ``target`` over ``dataset``'s rows (see the module docstring).

    ``dataset`` holds the rows the TRL dataset was built from (``prompt`` = :func:`prompt_of`); rows
    with the same prompt must be the same row, since TRL passes only prompts. ``tokenizer`` is the
    model directory whose ``tokenizer.json`` and chat template TrainGate renders with (the trainer's
    tokenizer's own). The rest bounds each rollout as in :func:`~osmosis_ai.train.rollouts.collect_samples`;
    ``on_rollout(session)`` sees each rollout's gateway record as it is scored.
    """

    def __init__(
        self,
        target: Target,
        *,
        dataset: Sequence[Mapping[str, Any]],
        tokenizer: str | Path,
        concurrency: int = 8,
        timeout: float = 300.0,
        max_turns: int = 10,
        max_tokens_total: int = 8192,
        on_rollout: OnDone | None = None,
    ) -> None:
        from osmosis_ai.traingate.tokenizer import ChatTokenizer

        self.target = target
        self.tokenizer = ChatTokenizer.from_directory(tokenizer)
        self.concurrency, self.timeout = concurrency, timeout
        self.max_turns, self.max_tokens_total = max_turns, max_tokens_total
        self.on_rollout = on_rollout
        self.rows: dict[str, tuple[int, Mapping[str, Any]]] = {}
        for index, row in enumerate(dataset):
            key = _key(prompt_of(row))
            seen = self.rows.setdefault(key, (index, row))
            if _key(seen[1]) != _key(row):
                raise ValueError(
                    f"dataset rows {seen[0]} and {index} have the same prompt but differ; TRL passes only the "
                    "prompt to rollout_func, so they cannot be told apart: make their prompts distinct"
                )

    def row_of(self, prompt: Any) -> Mapping[str, Any]:
        """The dataset row whose prompt is ``prompt``."""
        return self._found(prompt)[1]

    def index_of(self, prompt: Any) -> int:
        """The position in ``dataset`` of the row whose prompt is ``prompt``."""
        return self._found(prompt)[0]

    def _found(self, prompt: Any) -> tuple[int, Mapping[str, Any]]:
        found = self.rows.get(_key(prompt))
        if found is None:
            raise ValueError(
                f"a prompt TRL passed is in no row of the dataset given to OsmosisRollouts: {str(prompt)[:120]}"
            )
        return found

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from osmosis_ai._sync import run_sync

        if getattr(trainer, "use_vllm", False):
            raise ValueError(
                "OsmosisRollouts generates with the trainer's own model: set use_vllm=False in GRPOConfig"
            )
        rows = [self.row_of(prompt) for prompt in prompts]
        samples = run_sync(
            collect_samples(
                self.target,
                TRLPolicy(trainer),
                self.tokenizer,
                rows,
                concurrency=self.concurrency,
                timeout=self.timeout,
                max_turns=self.max_turns,
                max_tokens_total=self.max_tokens_total,
                on_done=self.on_rollout,
            )
        )
        mode = "train" if trainer.model.training else "eval"
        group = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        offset = trainer.accelerator.process_index * len(prompts)
        rewards = exclude_thin_groups([s.reward if s.trainable else None for s in samples], group, offset)
        trainer._metrics[mode][EXCLUDED_METRIC].append(sum(r is None for r in rewards) / max(len(rewards), 1))
        return self._output(samples, rewards)

    def _output(self, samples: list[Sample], rewards: list[float | None]) -> dict[str, Any]:
        eos = self.tokenizer.encode(self.tokenizer.eos_token or "")[:1]
        completions, masks = [], []
        for sample in samples:
            # A rollout that generated nothing still needs one token for TRL's batch: masked out.
            completions.append(sample.completion_ids or eos)
            masks.append(sample.mask if sample.completion_ids else [0] * len(eos))
        logprobs = [s.logprobs for s in samples]
        return {
            "prompt_ids": [s.prompt_ids for s in samples],
            "completion_ids": completions,
            "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
            "env_mask": masks,
            REWARD_KEY: rewards,
            "osmosis_outcome": [str(s.outcome) for s in samples],
            "osmosis_error": [
                THIN_GROUP if s.error is None and reward is None else s.error
                for s, reward in zip(samples, rewards, strict=True)
            ],
        }


def exclude_thin_groups(rewards: list[float | None], group: int, offset: int = 0) -> list[float | None]:
    """``rewards`` with every group of ``group`` consecutive completions (counted from ``offset``)
    that keeps fewer than two rewards set to all ``None``: one reward alone has no baseline to learn from."""
    out = list(rewards)
    if group < 2:
        return out
    for start in range(-(offset % group), len(out), group):
        members = range(max(start, 0), min(start + group, len(out)))
        if sum(out[i] is not None for i in members) < 2:
            for i in members:
                out[i] = None
    return out
