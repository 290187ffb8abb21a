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

With ``GRPOConfig(use_vllm=True, vllm_mode="server")`` the trainer's vLLM server answers instead
(:class:`VLLMPolicy`, through TRL's own client, from the same prompt ids), its log-probabilities go
back to TRL for its importance-sampling correction, and TRL keeps syncing the trainer's weights to
the server before each generation step; ``vllm_mode="colocate"`` is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.train.rollouts import Limits, Sample, Target, collect_samples, exclude_thin_groups
from osmosis_ai.traingate.append_only import canonical
from osmosis_ai.traingate.policy.base import Generation, Message
from osmosis_ai.traingate.policy.tokens import TokenPolicy, generation_of, turn_limit

if TYPE_CHECKING:
    from osmosis_ai.runs.rollouts import OnDone

__all__ = ["OsmosisRollouts", "TRLPolicy", "VLLMPolicy", "prompt_of", "server_reward"]

EXCLUDED_METRIC = "osmosis/excluded_frac"
REWARD_KEY = "osmosis_reward"
THIN_GROUP = "excluded: fewer than two rollouts of its group were scored"
NO_LOGPROBS = (
    "the vLLM server returned no log-probabilities (TRL's importance-sampling correction needs them)"
)


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
        answer: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(prompt_ids), _turn_limit(self.trainer, params), answer))
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
            generations.append(generation_of(tokenizer, generated))
        return generations


class VLLMPolicy(TokenPolicy):
    """The trainer's vLLM server generating from token ids (``GRPOConfig(use_vllm=True, vllm_mode="server")``).

    Each chat call is one request through TRL's own client (``trainer.vllm_generation.vllm_client``:
    vLLM's ``/v1/completions`` with the prompt's ids) with the trainer's sampling arguments, and comes
    back with the log-probability of each sampled token. The client blocks, so each request runs in a
    worker thread; the server batches the requests in flight. TRL syncs the trainer's weights to the
    server before each generation step calls ``rollout_func``. A chat call's ``max_tokens`` can only
    lower ``max_completion_length`` for its turn.
    """

    name = "trl-vllm"

    def __init__(self, trainer: Any, client: Any) -> None:
        self.trainer = trainer
        self.client = client

    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        return await asyncio.to_thread(self._generate, list(prompt_ids), _turn_limit(self.trainer, params))

    def _generate(self, prompt_ids: list[int], limit: int) -> Generation:
        args = self.trainer.args
        output = self.client.generate(
            [prompt_ids],
            n=1,
            repetition_penalty=args.repetition_penalty,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            min_p=0.0 if args.min_p is None else args.min_p,
            max_tokens=limit,
            logprobs=0,  # the sampled token's own
            generation_kwargs=args.generation_kwargs,
        )
        (ids,) = output["completion_ids"]
        logprobs = None
        if output["logprobs"] is not None:
            # Each position's entries are sorted by probability: the sampled token's is found by its id.
            (values,), (tokens,) = output["logprobs"], output["logprob_token_ids"]
            logprobs = [lps[ids_.index(token)] for token, lps, ids_ in zip(ids, values, tokens, strict=True)]
            if any(value is None for value in logprobs):  # vLLM's NaN
                logprobs = None
        return generation_of(self.trainer.processing_class, [int(token) for token in ids], logprobs)


def _turn_limit(trainer: Any, params: dict[str, Any]) -> int:
    """The turn's new-token budget: ``max_completion_length``, lowered by the chat call's ``max_tokens``."""
    return turn_limit(int(trainer.args.max_completion_length), params)


def _policy_of(trainer: Any) -> TokenPolicy:
    """What generates for ``trainer``: its own model, or its vLLM server (see the module docstring)."""
    if not getattr(trainer, "use_vllm", False):
        return TRLPolicy(trainer)
    if trainer.vllm_mode != "server":
        raise ValueError(
            f"OsmosisRollouts drives TRL's vLLM in server mode only, not vllm_mode={trainer.vllm_mode!r}: set "
            "vllm_mode='server' (a `vllm serve` server, TRL syncing the weights to it), or use_vllm=False to "
            "generate with the trainer's own model"
        )
    client = getattr(getattr(trainer, "vllm_generation", None), "vllm_client", None)
    # TRL connects the main process alone to the server: the main process is refused too, or it would
    # go on and wait for the others.
    if client is None or int(getattr(trainer.accelerator, "num_processes", 1)) > 1:
        raise ValueError(
            "OsmosisRollouts with TRL's vLLM server runs in one training process: TRL gives the server's client "
            "to the main process only; train in one process, or set use_vllm=False"
        )
    return VLLMPolicy(trainer, client)


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

        policy = _policy_of(trainer)
        rows = [self.row_of(prompt) for prompt in prompts]
        samples = run_sync(
            collect_samples(
                self.target, policy, self.tokenizer, rows, limits=self.limits, on_done=self.on_rollout
            )
        )
        # TRL corrects for the sampler (importance sampling): it needs the sampled tokens' log-probabilities.
        sampled = isinstance(policy, VLLMPolicy)
        if sampled:
            samples = [
                replace(s, error=NO_LOGPROBS) if s.trainable and s.logprobs is None else s for s in samples
            ]
        mode = "train" if trainer.model.training else "eval"
        group = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        offset = trainer.accelerator.process_index * len(prompts)
        rewards = exclude_thin_groups([s.reward if s.trainable else None for s in samples], group, offset)
        trainer._metrics[mode][EXCLUDED_METRIC].append(sum(r is None for r in rewards) / max(len(rewards), 1))
        return self._output(samples, rewards, sampled)

    def _output(self, samples: list[Sample], rewards: list[float | None], sampled: bool) -> dict[str, Any]:
        eos = self.tokenizer.encode(self.tokenizer.eos_token or "")[:1]
        completions, masks = [], []
        for sample, reward in zip(samples, rewards, strict=True):
            # A rollout that generated nothing still needs one token for TRL's batch. An excluded
            # one's tokens are all masked out: with advantage 0 they would still weigh in the loss's
            # normalisation and its KL term.
            completions.append(sample.completion_ids or eos)
            mask = sample.mask if reward is not None else [0] * len(sample.mask)
            masks.append(mask if sample.completion_ids else [0] * len(eos))
        logprobs: list[list[float]] | None = None
        if sampled:  # one per completion token; where the sampler has none, nothing is trained on
            logprobs = [
                s.logprobs if s.logprobs is not None and s.completion_ids else [0.0] * len(completion)
                for s, completion in zip(samples, completions, strict=True)
            ]
        return {
            "prompt_ids": [s.prompt_ids for s in samples],
            "completion_ids": completions,
            "logprobs": logprobs,
            "env_mask": masks,
            REWARD_KEY: rewards,
            "osmosis_outcome": [str(s.outcome) for s in samples],
            "osmosis_error": [
                THIN_GROUP if s.error is None and reward is None else s.error
                for s, reward in zip(samples, rewards, strict=True)
            ],
        }
