"""TRL's ``GRPOTrainer`` training a rollout server: a ``rollout_func`` and the reward function it feeds.

``OsmosisRollouts(target, dataset=rows, tokenizer=model_dir)`` is called by the trainer as
``rollout_func(prompts, trainer)``: each prompt (already repeated once per generation) is mapped back
to its dataset row, every one becomes a rollout through the local TrainGate against ``target``
(:func:`~osmosis_ai.train.rollouts.collect_samples`), and the trainer's own model answers every chat
call from the token trace's prompt ids (``model.generate`` in a worker thread, the calls waiting
meanwhile batched into the next one). The returned ``prompt_ids``/``completion_ids`` are the ids
TrainGate recorded, ``env_mask`` is 0 on the tool and environment tokens between turns (and on every
token of an excluded rollout), ``logprobs`` is ``None`` (TRL computes the old
policy's log-probabilities itself), and ``osmosis_reward``/``osmosis_outcome``/``osmosis_error``
reach the reward functions. :func:`server_reward` returns the server's reward, and ``None`` for a
typed failure, which TRL keeps out of its group statistics with advantage 0; a group with fewer
than two scored rollouts left is excluded whole. The share excluded is logged to the trainer's
metrics as ``osmosis/excluded_frac`` (see docs/design/training.md).

TRL's vLLM generation is not driven from here: a trainer with ``use_vllm`` is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.train.rollouts import Limits, Sample, Target, collect_samples, exclude_thin_groups
from osmosis_ai.traingate.append_only import canonical
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


def _prompt_key(prompt: Any) -> str:
    """A prompt's identity: its messages' canonical JSON (a ``datasets`` column fills the keys some
    messages lack with ``null``, which canonical JSON leaves out)."""
    if isinstance(prompt, list):
        return "\n".join(canonical(message) for message in prompt)
    return canonical(prompt)


def server_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The rollout server's reward of each completion; ``None`` for a typed failure (excluded, never 0)."""
    rewards = kwargs.get(REWARD_KEY)
    if rewards is None:
        raise ValueError(
            f"server_reward needs the {REWARD_KEY!r} column: give GRPOTrainer rollout_func=OsmosisRollouts(...)"
        )
    return [None if value is None else float(value) for value in rewards]


class TRLPolicy(TokenPolicy):
    """The trainer's model generating from token ids, in a worker thread, never on the event loop.

    Calls arriving while the model generates are answered together by its next ``generate`` (one
    left-padded batch): the model is shared, so one call runs at a time, and a batch costs a trainer's
    accelerator about what one prompt does. Sampling follows the trainer's arguments (``temperature``,
    ``top_p``, ``top_k``); a chat call's ``max_tokens`` can only lower ``max_completion_length`` for
    its turn. ``batches`` counts the ``generate`` calls made.
    """

    name = "trl"

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.batches = 0
        self._waiting: list[tuple[list[int], int, asyncio.Future[Generation]]] = []
        self._draining: asyncio.Task[None] | None = None

    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        limit = int(self.trainer.args.max_completion_length)
        asked = params.get("max_tokens")
        if isinstance(asked, int) and asked > 0:
            limit = min(limit, asked)
        answer: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(prompt_ids), limit, answer))
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain())
        return await answer

    async def _drain(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                generations = await asyncio.to_thread(self._generate, [(p, n) for p, n, _ in batch])
            except BaseException as exc:
                for _, _, answer in batch:
                    if not answer.done():
                        answer.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, _, answer), generation in zip(batch, generations, strict=True):
                if not answer.done():
                    answer.set_result(generation)

    def _generate(self, requests: list[tuple[list[int], int]]) -> list[Generation]:
        import torch

        trainer, args = self.trainer, self.trainer.args
        tokenizer = trainer.processing_class
        eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
        model = trainer.accelerator.unwrap_model(trainer.model)
        width = max(len(prompt) for prompt, _ in requests)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p, _ in requests], device=model.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in requests], device=model.device)
        training = model.training
        model.eval()  # sampling without dropout; training waits for the rollouts meanwhile
        try:
            with torch.no_grad():
                output = model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=max(limit for _, limit in requests),
                    do_sample=True,
                    temperature=args.temperature,
                    top_p=args.top_p,
                    top_k=args.top_k or None,
                    eos_token_id=eos,
                    pad_token_id=pad,
                )
        finally:
            model.train(training)
        self.batches += 1
        generations = []
        for row, (_, limit) in zip(output[:, width:].tolist(), requests, strict=True):
            # Each turn's own limit: the tokens before it are sampled as they would be alone.
            generated = [int(token) for token in row[:limit]]
            if eos in generated:  # what follows the end of turn is padding
                generated = generated[: generated.index(eos) + 1]
            text = tokenizer.decode(generated, skip_special_tokens=True)
            reason = "stop" if generated and generated[-1] == eos else "length"
            generations.append(Generation(assistant_message(text), finish_reason=reason, token_ids=generated))
        return generations


class OsmosisRollouts:
    """TRL's ``rollout_func`` for ``target`` over ``dataset``'s rows (see the module docstring).

    ``dataset`` holds the rows the TRL dataset was built from (``prompt`` = :func:`prompt_of`); rows
    with the same prompt must be the same row, since TRL passes only prompts. ``tokenizer`` is the
    model directory whose ``tokenizer.json`` and chat template TrainGate renders with (the trainer's
    tokenizer's own). ``limits`` bound each rollout (:class:`~osmosis_ai.train.rollouts.Limits`);
    ``on_rollout(session)`` sees each rollout's gateway record as it is scored.
    """

    def __init__(
        self,
        target: Target,
        *,
        dataset: Sequence[Mapping[str, Any]],
        tokenizer: str | Path,
        limits: Limits | None = None,
        on_rollout: OnDone | None = None,
    ) -> None:
        from osmosis_ai.traingate.tokenizer import ChatTokenizer

        self.target = target
        self.tokenizer = ChatTokenizer.from_directory(tokenizer)
        self.limits = limits
        self.on_rollout = on_rollout
        self.rows: dict[str, tuple[int, Mapping[str, Any]]] = {}
        for index, row in enumerate(dataset):
            key = _prompt_key(prompt_of(row))
            seen = self.rows.setdefault(key, (index, row))
            if canonical(seen[1]) != canonical(row):
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
        found = self.rows.get(_prompt_key(prompt))
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
                limits=self.limits,
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
        for sample, reward in zip(samples, rewards, strict=True):
            # A rollout that generated nothing still needs one token for TRL's batch. An excluded
            # one's tokens are all masked out: with advantage 0 they would still weigh in the loss's
            # normalisation and its KL term.
            completions.append(sample.completion_ids or eos)
            mask = sample.mask if reward is not None else [0] * len(sample.mask)
            masks.append(mask if sample.completion_ids else [0] * len(eos))
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
