"""Running dataset rows through a rollout server from Python: :func:`run_rollouts`.

A thin use of the run engine (:mod:`osmosis_ai.runs`): every row ``config.n`` times through the
:class:`~osmosis_ai.runs.executors.traingate.TrainGateExecutor` and the scorer (the trainer-side
``config.reward_fn`` when given, else the agent's own reward), at most ``config.concurrency`` in
flight. It returns every rollout's session, scored, in (row, sample) order: the gateway's record of
each rollout with its turns and token data. ``osmosis rollout run`` streams instead and keeps none.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.policy.base import Policy
from osmosis_ai.traingate.reward import RewardFn
from osmosis_ai.traingate.session import RolloutSession


@dataclass
class RunConfig:
    """How to run: where the rollout server is and the limits of the run."""

    server_url: str
    server_api_key: str | None = None
    n: int = 1
    concurrency: int = 8
    timeout: float = 300.0
    max_turns: int = 10
    max_tokens_total: int = 8192
    completion_params: dict[str, Any] = field(default_factory=dict)
    reward_fn: RewardFn | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    v03: bool = False  # the server speaks 0.3's wire (submit and poll) instead of 0.2's (init and callback)


OnDone = Callable[[RolloutSession], Awaitable[None] | None]


async def run_rollouts(
    gate: TrainGate,
    rows: Iterable[dict[str, Any]],
    config: RunConfig,
    *,
    on_done: OnDone | None = None,
    policy: Policy | None = None,
) -> list[RolloutSession]:
    """Run ``config.n`` rollouts of every row against ``config.server_url`` (over 0.3's wire when
    ``config.v03``); return the sessions in (row, sample) order, each with its ``reward`` (or ``reward_error``) set. ``on_done(session)`` is
    called as each rollout is scored (awaited if it returns an awaitable); ``policy`` answers these
    rollouts' chat calls instead of ``gate``'s own. A rollout that ran has a
    session whatever its outcome; the run loop raises rather than lose one, so only a run stopped
    early (a systemic failure) returns fewer than every row ``config.n`` times."""
    from osmosis_ai.runs.engine import Pipeline, run_items
    from osmosis_ai.runs.executors.traingate import TrainGateExecutor
    from osmosis_ai.runs.executors.traingate03 import TrainGate03Executor
    from osmosis_ai.runs.items import work_items
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.scorer import Scorer, reward_function
    from osmosis_ai.traingate.launcher import RolloutLauncher
    from osmosis_ai.traingate.launcher03 import Launcher03

    sessions: list[RolloutSession] = []

    async def collect(result: Result) -> None:
        session: RolloutSession = result.attempt.source
        session.reward, session.reward_error = result.reward, result.reward_error
        sessions.append(session)
        if on_done is not None:
            done = on_done(session)
            if done is not None:
                await done

    scorer = Scorer([reward_function(config.reward_fn)], reward="reward") if config.reward_fn else Scorer()
    async with (Launcher03 if config.v03 else RolloutLauncher)(
        config.server_url, api_key=config.server_api_key, max_connections=max(config.concurrency, 1)
    ) as launcher:
        executor = (TrainGate03Executor if config.v03 else TrainGateExecutor)(
            gate,
            launcher,
            timeout=config.timeout,
            max_turns=config.max_turns,
            max_tokens_total=config.max_tokens_total,
            completion_params=config.completion_params,
            run_id=config.run_id,
            retain_finished=None,
            policy=policy,
        )
        await run_items(
            work_items(enumerate(rows), n=config.n),
            Pipeline(executor, scorer),
            concurrency=config.concurrency,
            on_result=collect,
        )
    sessions.sort(key=lambda s: (s.row_index, s.sample_index))
    return sessions
