"""Running a dataset through a rollout server: init each rollout, wait for its callback, score it.

:func:`stream_rollouts` drives ``n`` rollouts per row with at most ``concurrency`` in flight,
reading the rows lazily and keeping no finished rollout (``osmosis rollout run``);
:func:`run_rollouts` does the same and returns every session. Every rollout ends in a status:
``COMPLETED``/``ERROR`` as reported by the rollout server, or an infrastructure failure —
``INIT_FAILED`` (init answered with another status than 200/202), ``UNREACHABLE`` (no answer),
``TIMEOUT`` (no init answer or no ``/v1/rollout/completed`` before the rollout's deadline) — and so
in one :class:`~osmosis_ai.evaluation.outcome.Outcome` (``RolloutSession.outcome``). A reward that
raises or is not a finite number, whether the trainer-side function's or the agent's own, is a
``reward_error``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai._pool import run_bounded
from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.launcher import InitRejected, RolloutLauncher, ServerUnreachable
from osmosis_ai.traingate.reward import RewardFn, compute_reward
from osmosis_ai.traingate.session import RolloutSession

logger = logging.getLogger(__name__)

# Finished rollouts the gateway still routes (for late or duplicate callbacks) in a streamed run.
DEFAULT_RETAINED = 1024


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


def row_messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The initial conversation of a dataset row."""
    return [
        {"role": "system", "content": row["system_prompt"]},
        {"role": "user", "content": row["user_prompt"]},
    ]


def row_metadata(row: dict[str, Any], row_index: int, sample_index: int) -> dict[str, Any]:
    """Request metadata: ground truth, position, and every extra column of the row."""
    extra = {k: v for k, v in row.items() if k not in ("system_prompt", "user_prompt")}
    return {
        **extra,
        "ground_truth": row["ground_truth"],
        "row_index": row_index,
        "sample_index": sample_index,
    }


async def _score(session: RolloutSession, row: dict[str, Any], config: RunConfig) -> None:
    if config.reward_fn is None:
        reward = session.agent_reward
        if reward is not None and not math.isfinite(reward):
            session.reward_error = (
                f"the agent reported a non-finite reward ({reward!r}); a reward must be a finite number"
            )
            return
        session.reward = reward
        return
    try:
        session.reward = await compute_reward(
            config.reward_fn, session.final_messages, row["ground_truth"], dict(row)
        )
    except Exception as exc:  # user code: record and keep going
        session.reward_error = f"{type(exc).__name__}: {exc}"
        logger.warning("reward function failed on rollout %s: %s", session.rollout_id, session.reward_error)


async def _run_one(
    gate: TrainGate,
    launcher: RolloutLauncher,
    config: RunConfig,
    session: RolloutSession,
    row: dict[str, Any],
) -> None:
    session.started_at = time.monotonic()
    request = launcher.build_request(
        session,
        gate.url,
        completion_params=config.completion_params,
        max_turns=config.max_turns,
        max_tokens_total=config.max_tokens_total,
    )
    try:
        # The rollout's deadline covers its init too: a server that never answers costs the
        # timeout, not the HTTP client's own (longer) limits and retries.
        init = await asyncio.wait_for(launcher.init(request), config.timeout)
    except (InitRejected, ServerUnreachable) as exc:
        session.initialized.set()
        session.finish("INIT_FAILED" if isinstance(exc, InitRejected) else "UNREACHABLE", str(exc))
        return
    except asyncio.TimeoutError:
        session.initialized.set()
        session.finish(
            "TIMEOUT",
            f"the rollout server at {launcher.server_url} did not answer the init within {config.timeout:g}s",
        )
        return
    session.tools = [tool.model_dump(mode="json", exclude_none=True) for tool in init.tools]
    session.initialized.set()
    if not session.finished:
        session.status = "RUNNING"
    remaining = config.timeout - (time.monotonic() - session.started_at)
    try:
        await asyncio.wait_for(session.done.wait(), timeout=max(remaining, 0.001))
    except asyncio.TimeoutError:
        session.finish(
            "TIMEOUT",
            f"no /v1/rollout/completed callback within {config.timeout:g}s "
            f"({session.num_turns} chat turn(s) served)",
        )
        return
    await _score(session, row, config)


OnDone = Callable[[RolloutSession], Awaitable[None] | None]
Admit = Callable[[int], Awaitable[None]]
Skip = Callable[[int, int], bool]


async def stream_rollouts(
    gate: TrainGate,
    rows: Iterable[dict[str, Any]],
    config: RunConfig,
    *,
    on_done: OnDone | None = None,
    admit: Admit | None = None,
    skip: Skip | None = None,
    retain_finished: int | None = DEFAULT_RETAINED,
) -> int:
    """Run ``config.n`` rollouts of every row of ``rows`` (read lazily), at most ``config.concurrency``
    at once; return how many ran.

    Rows are taken from the iterable only a bounded distance ahead of the rollouts in flight
    (:func:`~osmosis_ai._pool.run_bounded`), so a dataset is never held whole.
    Each rollout has a sequence number (``position * n + sample``); ``admit(seq)``, if given, is
    awaited before that rollout starts (an in-order writer uses it to bound what it buffers).
    ``skip(row, sample)``, if given, is asked once per rollout in sequence order and a rollout it
    answers true for is not run (a resumed run skips what its journal already has); the rows are
    still read in order, one at a time, so skipping holds nothing either.
    ``on_done(session)`` is called as each rollout ends and awaited if it returns an awaitable, with
    the rollout's slot still held, so a slow consumer slows the run instead of piling up results.
    The gateway forgets a finished rollout once ``retain_finished`` later ones have finished (a late
    callback for it is then refused as unknown); ``None`` keeps every one.

    The first exception raised by ``on_done``, ``admit`` or the row iterable cancels the rollouts
    in flight and is raised.
    """
    retired: deque[str] = deque()

    def retire(session: RolloutSession) -> None:
        if retain_finished is None:
            return
        retired.append(session.rollout_id)
        while len(retired) > retain_finished:
            gate.sessions.pop(retired.popleft(), None)

    # The pool counts positions among the rollouts it is given; with skips those are not sequence
    # numbers, so the rollout each position stands for is remembered until the pool admits it.
    upcoming: deque[int] = deque()

    def rollouts() -> Iterator[tuple[int, int, dict[str, Any]]]:
        for row_index, row in enumerate(rows):
            for sample in range(config.n):
                if skip is not None and skip(row_index, sample):
                    continue
                if admit is not None:
                    upcoming.append(row_index * config.n + sample)
                yield row_index, sample, row

    def in_sequence(admit: Admit) -> Admit:
        async def before_start(_position: int) -> None:
            await admit(upcoming.popleft())

        return before_start

    async with RolloutLauncher(
        config.server_url, api_key=config.server_api_key, max_connections=max(config.concurrency, 1)
    ) as launcher:

        async def one(item: tuple[int, int, dict[str, Any]]) -> None:
            row_index, sample, row = item
            session = gate.open_session(
                f"tg-{config.run_id}-r{row_index}-s{sample}",
                row_messages(row),
                row_index=row_index,
                sample_index=sample,
                metadata=row_metadata(row, row_index, sample),
            )
            try:
                await _run_one(gate, launcher, config, session, row)
                if on_done is not None:
                    result = on_done(session)
                    if result is not None:
                        await result
            finally:
                retire(session)

        return await run_bounded(
            rollouts(),
            one,
            concurrency=config.concurrency,
            before_start=in_sequence(admit) if admit else None,
        )


async def run_rollouts(
    gate: TrainGate,
    rows: Iterable[dict[str, Any]],
    config: RunConfig,
    *,
    on_done: OnDone | None = None,
) -> list[RolloutSession]:
    """Run ``config.n`` rollouts of every row against ``config.server_url``; return the sessions in
    (row, sample) order. Keeps every session (and the gateway keeps them too); for a large run use
    :func:`stream_rollouts`, which keeps none.
    """
    sessions: list[RolloutSession] = []

    async def collect(session: RolloutSession) -> None:
        sessions.append(session)
        if on_done is not None:
            result = on_done(session)
            if result is not None:
                await result

    await stream_rollouts(gate, rows, config, on_done=collect, retain_finished=None)
    sessions.sort(key=lambda s: (s.row_index, s.sample_index))
    return sessions
