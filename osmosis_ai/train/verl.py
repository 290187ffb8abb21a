"""verl's agent loop training a rollout server: every verl row is one rollout through the local TrainGate.

:class:`OsmosisAgentLoop` is an ``AgentLoopBase`` that runs the row's rollout against a :class:`Target`
(a running 0.2 or 0.3 server at ``url``, or an in-process ``agent`` named ``module:attribute``)
through the worker's :class:`~osmosis_ai.train.rollouts.Collector` (one per agent-loop worker), the
model answering each chat call through verl's server manager (:class:`VerlPolicy`: prompt ids in,
generated ids and log-probabilities out). It
returns the ids TrainGate recorded: ``prompt_ids``, ``response_ids``, ``response_mask`` (0 exactly on
the tool and environment tokens between turns), ``response_logprobs``, the server's reward as
``reward_score``, and the outcome in ``extra_fields``.

A typed failure (agent error, timeout, reward error, infrastructure failure, append-only violation)
is never a reward. Its ``response_mask`` is all zeros (nothing of it is trained on) and its
``reward_score`` is NaN; the advantage estimator this module registers with verl,
``algorithm.adv_estimator=osmosis_grpo`` (:func:`osmosis_grpo_advantage`), leaves such rollouts out of
their group's mean and standard deviation, gives a group with fewer than two scored rollouts no
advantage at all, and logs how many it left out. verl's own ``grpo`` would average the placeholder in,
so the agent loop refuses to run under any other estimator. The configuration a user writes is in
docs/design/training.md.

The two classes verl names in its configuration subclass verl's own, so they are built when first
asked for (``OsmosisAgentLoop``, ``OsmosisAgentLoopManager``): importing verl's agent loop loads
transformers' model stack and verl's trainer loads every training engine it finds, and this module
stays importable without either.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.train.rollouts import Collector, Limits, Sample, Target
from osmosis_ai.traingate.policy.base import Generation, Message
from osmosis_ai.traingate.policy.tokens import TokenPolicy, generation_of, turn_limit
from osmosis_ai.traingate.tokenizer import ChatTokenizer

if TYPE_CHECKING:
    import torch

__all__ = [
    "ESTIMATOR",
    "NAME",
    "VerlPolicy",
    "agent_loop_output",
    "osmosis_grpo_advantage",
    "row_of",
]

NAME = "osmosis"
ESTIMATOR = "osmosis_grpo"

logger = logging.getLogger(__name__)


def row_of(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset row (``system_prompt``, ``user_prompt``, ``ground_truth``, extra columns) of a verl
    row's fields: ``raw_prompt`` is an optional system message and one user message, the ground truth
    is ``reward_model.ground_truth`` (else ``extra_info.ground_truth``), and ``extra_info``'s other
    entries reach the server as metadata."""
    raw = fields.get("raw_prompt")  # a list, or a numpy array of messages from a batch column
    messages = [dict(message) for message in (raw if raw is not None else [])]
    roles = [message.get("role") for message in messages]
    if roles not in (["user"], ["system", "user"]):
        raise ValueError(
            f"verl row {fields.get('index', '?')}: raw_prompt must be an optional system message and one "
            f"user message (roles {roles}); a rollout server starts from a system and a user prompt"
        )
    extra = dict(fields.get("extra_info") or {})
    reward_model = fields.get("reward_model") or {}
    if "ground_truth" in reward_model:
        extra["ground_truth"] = reward_model["ground_truth"]
    if "ground_truth" not in extra:
        raise ValueError(
            f"verl row {fields.get('index', '?')} has no ground truth: set reward_model.ground_truth "
            "(or extra_info.ground_truth) in the dataset"
        )
    row = {key: value for key, value in extra.items() if key not in ("system_prompt", "user_prompt")}
    if roles[0] == "system":
        row["system_prompt"] = messages[0]["content"]
    row["user_prompt"] = messages[-1]["content"]
    return row


class VerlPolicy(TokenPolicy):
    """The model behind verl's server manager, generating from the token trace's prompt ids.

    Every turn of one rollout goes out under one ``request_id`` (verl routes it to the same server,
    which keeps its prefix cache) with verl's ``sampling_params``; a chat call's ``max_tokens`` can only
    lower the turn's budget. The text of the generated ids, special tokens left out, is the assistant
    message (``<tool_call>`` blocks become tool calls).
    """

    name = "verl"

    def __init__(self, server_manager: Any, tokenizer: Any, sampling_params: Mapping[str, Any]) -> None:
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.sampling_params = dict(sampling_params)
        self.request_id = uuid.uuid4().hex

    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        sampling = dict(self.sampling_params)
        limit = turn_limit(sampling.get("max_tokens"), params)
        if limit is not None:
            sampling["max_tokens"] = limit
        output = await self.server_manager.generate(
            request_id=self.request_id, prompt_ids=list(prompt_ids), sampling_params=sampling
        )
        logprobs = [float(value) for value in output.log_probs] if output.log_probs else None
        return generation_of(self.tokenizer, [int(token) for token in output.token_ids], logprobs)


@lru_cache(maxsize=4)
def _chat_tokenizer(directory: str) -> ChatTokenizer:
    return ChatTokenizer.from_directory(directory)


@lru_cache(maxsize=4)
def _agent(spec: str, grader: str | None) -> Any:
    from osmosis_ai.rollout.loading import load_agent_loop

    return load_agent_loop(spec, grader)


_collectors: dict[tuple[Any, ...], asyncio.Future[Collector]] = {}
_tasks: set[asyncio.Task[None]] = set()  # the tasks holding collectors open, kept from the garbage collector


async def _hold(collector: Collector, opened: asyncio.Future[Collector]) -> None:
    """Keep ``collector`` open until its event loop shuts down (cancelling this task closes it)."""
    try:
        async with collector:
            opened.set_result(collector)
            await asyncio.Event().wait()
    except Exception as exc:  # the rollout awaiting ``opened`` raises it; the next one tries again
        if opened.done():  # it opened, and failed to close
            logger.warning("closing the agent loop's TrainGate failed: %s: %s", type(exc).__name__, exc)
        else:
            opened.set_exception(exc)
    except BaseException:
        if not opened.done():
            opened.cancel()
        raise


async def _worker_collector(settings: tuple[Any, ...], open_one: Callable[[], Collector]) -> Collector:
    """The collector of the running event loop (verl's agent-loop worker) for these ``settings``,
    opened by the first rollout asking (``open_one``) and shared by every later one: one gateway and
    one served agent per worker, since setting them up for each rollout cost each rollout their
    start-up and shutdown. One that failed to open is opened again by the next rollout."""
    loop = asyncio.get_running_loop()
    for stale in [key for key in _collectors if key[0].is_closed()]:
        del _collectors[stale]
    key = (loop, *settings)
    opened = _collectors.get(key)
    if opened is None or (opened.done() and (opened.cancelled() or opened.exception() is not None)):
        collector = open_one()  # made before it is registered: one that raises leaves nothing to wait for
        opened = _collectors[key] = loop.create_future()
        task = loop.create_task(_hold(collector, opened))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    return await asyncio.shield(opened)


def _agent_loop_settings(
    config: Any,
    *,
    url: str | None,
    api_key: str | None,
    agent: str | None,
    grader: str | None,
    tokenizer_dir: str | None,
) -> ChatTokenizer:
    """The chat tokenizer of an agent-loop entry in verl's trainer ``config``; the entry is refused in
    one line when it could not train honestly (see :class:`OsmosisAgentLoop`)."""
    where = f"agent loop {NAME!r} (agent_loop_config_path)"
    if (url is None) == (agent is None):
        raise ValueError(f"{where}: give exactly one of url (a running server) or agent (module:attribute)")
    estimator = config.algorithm.adv_estimator
    if estimator != ESTIMATOR:
        raise ValueError(
            f"{where}: algorithm.adv_estimator is {estimator!r}; set it to {ESTIMATOR!r} (and "
            "actor_rollout_ref.rollout.agent.agent_loop_manager_class to "
            "osmosis_ai.train.verl.OsmosisAgentLoopManager) so failed rollouts stay out of the advantages"
        )
    n = config.actor_rollout_ref.rollout.n
    if int(n) < 2:
        raise ValueError(
            f"{where}: actor_rollout_ref.rollout.n is {n}; GRPO needs at least 2 rollouts per prompt for a baseline"
        )
    directory = str(tokenizer_dir or config.actor_rollout_ref.model.path)
    if not Path(directory).is_dir():
        raise ValueError(
            f"{where}: {directory!r} is not a local model directory; set tokenizer_dir to the directory "
            "holding the model's tokenizer.json and chat template"
        )
    if agent is not None:
        _agent(agent, grader)  # a spec that does not load fails here, before any rollout
    return _chat_tokenizer(directory)


def agent_loop_output(
    sample: Sample, *, prompt_length: int, response_length: int, eos_token_id: int, logprobs: bool
) -> Any:
    """verl's ``AgentLoopOutput`` of ``sample`` (``logprobs``: verl asked for them). A typed failure, or
    a sample verl cannot take as it is, keeps its tokens with a mask of zeros and a NaN reward."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

    response, mask = sample.completion_ids[:response_length], sample.mask[:response_length]
    values = sample.logprobs[:response_length] if sample.logprobs is not None else None
    error = sample.error
    if error is None and len(sample.prompt_ids) > prompt_length:
        error = f"the first prompt has {len(sample.prompt_ids)} tokens, over rollout.prompt_length ({prompt_length})"
    if error is None and logprobs and values is None:
        error = "the server manager returned no log-probabilities"
    trainable = sample.trainable and error is None
    turns = 1 + sum(1 for i, bit in enumerate(mask) if i == 0 or bit != mask[i - 1])
    if not response:  # verl puts the reward on the last response token: one end of turn, masked out
        response, mask = [eos_token_id], [0]
    if not trainable:
        mask, values = [0] * len(response), None
    if logprobs and values is None:
        values = [0.0] * len(response)  # every row of verl's batch has them; none of these is trained on
    return AgentLoopOutput(
        prompt_ids=sample.prompt_ids[-prompt_length:],
        response_ids=response,
        response_mask=mask,
        response_logprobs=values if logprobs else None,
        reward_score=float(sample.reward) if trainable and sample.reward is not None else math.nan,
        num_turns=turns,
        metrics=AgentLoopMetrics(),
        extra_fields={
            "osmosis_outcome": str(sample.outcome),
            "osmosis_error": error,
            "osmosis_trainable": trainable,
            "osmosis_rollout_id": sample.rollout_id,
        },
    )


def _build() -> dict[str, type]:
    """verl's subclasses, the agent loop's registration and the estimator's (see the module docstring)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry, register
    from verl.trainer.ppo.core_algos import register_adv_est
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ

    class OsmosisAgentLoop(AgentLoopBase):
        """verl's agent loop for a rollout server (see the module docstring).

        Configured as an entry of ``actor_rollout_ref.rollout.agent.agent_loop_config_path``; verl
        passes the entry's other keys here: ``url`` (a 0.2 or 0.3 server) with ``api_key``, or
        ``agent`` (``module:attribute`` of a ``RolloutAgentLoop``, a ``LocalBackend``, or a 0.3
        ``AgentWorkflow`` with ``grader``, ``module:GraderClass``; served in the worker's process);
        ``tokenizer_dir``, the local model directory whose ``tokenizer.json`` and chat template
        TrainGate renders with (default ``actor_rollout_ref.model.path``); ``timeout`` and
        ``max_turns`` bound each rollout.
        """

        def __init__(
            self,
            *args: Any,
            url: str | None = None,
            api_key: str | None = None,
            agent: str | None = None,
            grader: str | None = None,
            tokenizer_dir: str | None = None,
            timeout: float = 300.0,
            max_turns: int = 10,
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.chat_tokenizer = _agent_loop_settings(
                self.config, url=url, api_key=api_key, agent=agent, grader=grader, tokenizer_dir=tokenizer_dir
            )
            self.url, self.api_key, self.agent, self.grader = url, api_key, agent, grader
            self.timeout, self.max_turns = float(timeout), int(max_turns)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            policy = VerlPolicy(self.server_manager, self.tokenizer, sampling_params)
            limits = Limits(concurrency=1, timeout=self.timeout, max_turns=self.max_turns,
                            max_tokens_total=int(self.rollout_config.response_length))  # fmt: skip

            def open_one() -> Collector:
                # Every rollout brings its own policy (its sampling parameters, its request id); the
                # collector's own, the first rollout's, answers nothing.
                target = (
                    Target(url=self.url, api_key=self.api_key)
                    if self.agent is None
                    else Target(agent=_agent(self.agent, self.grader))
                )
                return Collector(target, policy, self.chat_tokenizer, limits=limits)

            settings = (self.url, self.api_key, self.agent, self.grader, self.chat_tokenizer,
                        limits.timeout, limits.max_turns, limits.max_tokens_total)  # fmt: skip
            collector = await _worker_collector(settings, open_one)
            samples = await collector.collect([row_of(kwargs)], policy=policy)
            return agent_loop_output(
                samples[0],
                prompt_length=int(self.rollout_config.prompt_length),
                response_length=int(self.rollout_config.response_length),
                eos_token_id=int(self.tokenizer.eos_token_id),
                logprobs=bool(sampling_params.get("logprobs")),
            )

    class OsmosisAgentLoopManager(AgentLoopManagerTQ):
        """verl's v1 agent loop manager, unchanged. Named in ``agent_loop_manager_class``, it makes verl
        build it in the trainer's driver process, where advantages are computed and
        :func:`osmosis_grpo_advantage` must be registered."""

    built: dict[str, type] = {
        "OsmosisAgentLoop": OsmosisAgentLoop,
        "OsmosisAgentLoopManager": OsmosisAgentLoopManager,
    }
    for name, cls in built.items():  # named as this module's, where verl's configuration finds them
        cls.__module__, cls.__qualname__ = __name__, name
    if NAME not in _agent_loop_registry:
        # An agent_loop_config_path entry of this name carries the target's settings: hydra builds
        # this class while instantiating it, and a bare registration must not replace it.
        register(NAME)(OsmosisAgentLoop)
    register_adv_est(ESTIMATOR)(osmosis_grpo_advantage)
    return built


_built: dict[str, type] = {}


def __getattr__(name: str) -> type:
    if name not in ("OsmosisAgentLoop", "OsmosisAgentLoopManager"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _built:
        _built.update(_build())
    return _built[name]


def osmosis_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    epsilon: float = 1e-6,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO's outcome advantage over the scored rollouts of each group only.

    A rollout whose ``response_mask`` is all zeros (a typed failure) is left out of its group's mean
    and standard deviation and gets advantage 0, whatever its placeholder reward; a group with fewer
    than two scored rollouts has no baseline and gets advantage 0 throughout. ``index`` is verl's
    ``uid`` (one per prompt); ``config.norm_adv_by_std_in_grpo`` as for verl's ``grpo``.
    """
    import torch

    scored = response_mask.sum(dim=-1) > 0
    # Where a failure's NaN placeholder would poison any arithmetic it touched, it becomes 0 first.
    scores = torch.where(scored, token_level_rewards.sum(dim=-1), torch.zeros(()))
    normalise = bool(getattr(config, "norm_adv_by_std_in_grpo", True)) if config is not None else True
    groups: dict[Any, list[int]] = defaultdict(list)
    for position, key in enumerate(index):
        if scored[position]:
            groups[key].append(position)
    advantages = torch.zeros_like(scores)
    thin = 0
    with torch.no_grad():
        for members in groups.values():
            if len(members) < 2:
                thin += len(members)
                continue
            values = scores[members]
            centred = values - values.mean()
            advantages[members] = centred / (values.std() + epsilon) if normalise else centred
    failed = int((~scored).sum())
    if failed or thin:
        logger.warning(
            "%s: %d of %d rollouts left out of the advantages (%d typed failures, %d alone in their group)",
            ESTIMATOR,
            failed + thin,
            len(scores),
            failed,
            thin,
        )
    out = advantages.unsqueeze(-1) * response_mask
    return out, out
