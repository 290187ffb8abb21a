"""The trainer-independent core of training a rollout server: a batch of rows in, one token sample per rollout out.

:func:`collect_samples` runs every row ``n`` times through the local TrainGate against a
:class:`Target` (an agent served in this process, or a running 0.2 or 0.3 server at a URL, told
apart by its ``/health``) with the run engine (:func:`~osmosis_ai.runs.rollouts.run_rollouts`), the
trainer's model answering every chat call as a
:class:`~osmosis_ai.traingate.policy.tokens.TokenPolicy`. Each rollout becomes a :class:`Sample`:
the first prompt's ids, everything after them (the model's tokens with mask 1, the tool and
environment messages' with mask 0), the per-token log-probabilities when the policy reported them,
the server's reward, and the typed outcome. A sample is trainable only when the rollout completed,
the server gave a reward, and every chat call extended the conversation append-only; anything else
is a typed failure with its reason, never a reward of 0 (see docs/design/training.md).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osmosis_ai.outcome import Outcome
from osmosis_ai.traingate.policy.tokens import TokenPolicy
from osmosis_ai.traingate.session import RolloutSession
from osmosis_ai.traingate.tokenizer import ChatTokenizer

if TYPE_CHECKING:
    from osmosis_ai.runs.rollouts import OnDone
    from osmosis_ai.traingate.gateway import TrainGate

__all__ = ["Collector", "Limits", "Sample", "Target", "collect_samples", "exclude_thin_groups", "sample_of"]


@dataclass(frozen=True)
class Target:
    """The rollout server being trained: ``agent`` (a ``RolloutAgentLoop``, served in this process over
    the 0.2 wire) or ``url`` (a running 0.2 or 0.3 server, with ``api_key`` as its Bearer key)."""

    agent: Any = None
    url: str | None = None
    api_key: str | None = None

    def __post_init__(self) -> None:
        if (self.agent is None) == (self.url is None):
            raise ValueError("a training target is an agent or a server url: give exactly one")


@dataclass
class Sample:
    """One rollout as a trainer trains on it (see the module docstring).

    ``completion_ids``, ``mask`` and ``logprobs`` (when known; 0.0 at mask-0 positions) have one entry
    per token after ``prompt_ids``. ``error`` says why an untrainable sample is one.
    """

    rollout_id: str
    row_index: int
    sample_index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    mask: list[int]
    logprobs: list[float] | None
    reward: float | None
    outcome: Outcome
    error: str | None = None

    @property
    def trainable(self) -> bool:
        return self.outcome is Outcome.COMPLETED and self.reward is not None and self.error is None


def _first_prompt(session: RolloutSession, tokenizer: ChatTokenizer) -> list[int]:
    if session.turns:
        return list(session.turns[0].prompt_token_ids)
    rendered = tokenizer.render(session.messages, tools=session.tools or None, add_generation_prompt=True)
    return tokenizer.encode(rendered)


def _untrainable_reason(session: RolloutSession) -> tuple[Outcome, str | None]:
    """The outcome a trainer acts on and, for a failure, why (the first reason found)."""
    outcome = session.outcome
    if outcome is not Outcome.COMPLETED:
        why = (
            session.reward_error or session.error_message or (session.errors[-1] if session.errors else None)
        )
        return outcome, why or outcome.value
    if session.violations:
        # The agent changed the conversation the model saw: the tokens no longer say what happened.
        return Outcome.AGENT_ERROR, f"append-only violation: {session.violations[0].describe()}"
    trace = session.trace
    if trace is None or trace.broken is not None:
        return Outcome.INFRA_ERROR, f"no token trace: {trace.broken if trace else 'no chat template'}"
    if session.reward is None:
        return Outcome.REWARD_ERROR, "the server reported no reward"
    return outcome, None


def sample_of(session: RolloutSession, tokenizer: ChatTokenizer) -> Sample:
    """The :class:`Sample` of a finished, scored session whose turns are kept (see the module docstring)."""
    outcome, error = _untrainable_reason(session)
    prompt = _first_prompt(session, tokenizer)
    completion: list[int] = []
    mask: list[int] = []
    trace = session.trace
    if trace is not None and session.turns:
        if trace.ids[: len(prompt)] != prompt:
            if error is None:
                outcome, error = Outcome.INFRA_ERROR, "the trajectory does not start with the first prompt"
        else:
            completion, mask = trace.ids[len(prompt) :], trace.mask[len(prompt) :]
    logprobs: list[float] | None = None
    if completion and all(turn.logprobs is not None for turn in session.turns):
        generated = [value for turn in session.turns for value in turn.logprobs or []]
        if len(generated) == sum(mask):
            values = iter(generated)
            logprobs = [next(values) if bit else 0.0 for bit in mask]
    return Sample(
        rollout_id=session.rollout_id,
        row_index=session.row_index,
        sample_index=session.sample_index,
        prompt_ids=prompt,
        completion_ids=list(completion),
        mask=list(mask),
        logprobs=logprobs,
        reward=session.reward if error is None else None,
        outcome=outcome,
        error=error,
    )


def _lost(run_id: str, row_index: int, sample_index: int) -> Sample:
    """The sample of a rollout the run gave back no session for: an infrastructure failure."""
    return Sample(
        rollout_id=f"tg-{run_id}-r{row_index}-s{sample_index}",
        row_index=row_index,
        sample_index=sample_index,
        prompt_ids=[],
        completion_ids=[],
        mask=[],
        logprobs=None,
        reward=None,
        outcome=Outcome.INFRA_ERROR,
        error=f"the run gave back no rollout for row {row_index}, sample {sample_index}",
    )


@dataclass(frozen=True)
class Limits:
    """How each rollout is bounded: ``timeout`` seconds, ``max_turns`` chat calls, ``max_tokens_total``
    tokens, sent with ``completion_params``; at most ``concurrency`` rollouts in flight."""

    concurrency: int = 8
    timeout: float = 300.0
    max_turns: int = 10
    max_tokens_total: int = 8192
    completion_params: Mapping[str, Any] = field(default_factory=dict)


class Collector:
    """A TrainGate (and the served agent, or the checked server) kept open for many batches.

    ``async with Collector(target, policy, tokenizer) as collector: await collector.collect(rows)``;
    a trainer calling from one event loop for a whole run (verl's agent loop) opens it once, where
    :func:`collect_samples` opens and closes one per batch.

    Raises (on entry):
        ServerUnreachable / InitRejected: the ``url`` server does not answer its ``/health`` (nothing ran).
    """

    def __init__(
        self,
        target: Target,
        policy: TokenPolicy,
        tokenizer: ChatTokenizer,
        *,
        limits: Limits | None = None,
        gateway_host: str = "127.0.0.1",
    ) -> None:
        self.target, self.policy, self.tokenizer = target, policy, tokenizer
        self.limits = limits or Limits()
        self.gateway_host = gateway_host
        self._stack = contextlib.AsyncExitStack()
        self.gate: TrainGate | None = None  # open inside the `async with`
        self._url = ""
        self._v03 = False

    async def __aenter__(self) -> Collector:
        from osmosis_ai.traingate.gateway import TrainGate
        from osmosis_ai.traingate.launcher import RolloutLauncher, speaks_03
        from osmosis_ai.traingate.local_server import serve_agent_loop_locally

        async with contextlib.AsyncExitStack() as stack:
            gate = TrainGate(self.policy, tokenizer=self.tokenizer, host=self.gateway_host)
            self.gate = await stack.enter_async_context(gate)
            if self.target.url is not None:
                self._url = self.target.url
                launcher = RolloutLauncher(self._url, api_key=self.target.api_key)
                self._v03 = speaks_03(await launcher.check(timeout=min(self.limits.timeout, 10.0)))
            else:
                self._url = await stack.enter_async_context(serve_agent_loop_locally(self.target.agent))
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def collect(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        on_done: OnDone | None = None,
        policy: TokenPolicy | None = None,
    ) -> list[Sample]:
        """Run each of ``rows`` (dataset rows: ``user_prompt``, ``ground_truth``, optional
        ``system_prompt`` and extra columns) ``n`` times; the samples in (row, sample) order, a
        sample's ``row_index`` its row's position in ``rows``; exactly ``len(rows) * n`` of them, a
        rollout that left no session an infrastructure failure at its place. ``on_done(session)`` sees each
        rollout's whole gateway record as it is scored (what a journal keeps). ``policy`` generates
        for this batch instead of the collector's own (batches sampled each their own way, side by
        side on one gateway)."""
        from osmosis_ai.runs.rollouts import RunConfig, run_rollouts

        if self.gate is None:
            raise RuntimeError("use the Collector as `async with Collector(...) as collector`")
        limits = self.limits
        config = RunConfig(
            server_url=self._url,
            server_api_key=self.target.api_key,
            n=n,
            concurrency=limits.concurrency,
            timeout=limits.timeout,
            max_turns=limits.max_turns,
            max_tokens_total=limits.max_tokens_total,
            completion_params=dict(limits.completion_params),
            run_id=uuid.uuid4().hex[:12],
            v03=self._v03,
        )
        sessions = await run_rollouts(
            self.gate, [dict(row) for row in rows], config, on_done=on_done, policy=policy
        )
        for session in sessions:  # the batch is over: its sessions need not outlive it
            self.gate.sessions.pop(session.rollout_id, None)
        # A trainer pairs the samples with its prompts by position: every (row, sample) gets one.
        ran = {(session.row_index, session.sample_index): session for session in sessions}
        return [
            sample_of(ran[key], self.tokenizer) if key in ran else _lost(config.run_id, *key)
            for key in ((row, sample) for row in range(len(rows)) for sample in range(n))
        ]


async def collect_samples(
    target: Target,
    policy: TokenPolicy,
    tokenizer: ChatTokenizer,
    rows: Sequence[Mapping[str, Any]],
    *,
    n: int = 1,
    limits: Limits | None = None,
    gateway_host: str = "127.0.0.1",
    on_done: OnDone | None = None,
) -> list[Sample]:
    """One batch through a :class:`Collector` opened for it (see :meth:`Collector.collect`)."""
    async with Collector(target, policy, tokenizer, limits=limits, gateway_host=gateway_host) as collector:
        return await collector.collect(rows, n=n, on_done=on_done)


def exclude_thin_groups(rewards: list[float | None], group: int, offset: int = 0) -> list[float | None]:
    """``rewards`` with every group of ``group`` consecutive completions that keeps fewer than two
    rewards set to all ``None``: one reward alone has no baseline to learn from.

    Groups are counted from ``offset`` (the position of ``rewards[0]`` in the trainer's batch); a group
    only partly in ``rewards`` (the rest on another process) is left as it is: it cannot be judged here.
    """
    out = list(rewards)
    if group < 2:
        return out
    for start in range(-(offset % group), len(out), group):
        members = range(start, start + group)
        if start < 0 or start + group > len(out):
            continue
        if sum(out[i] is not None for i in members) < 2:
            for i in members:
                out[i] = None
    return out
