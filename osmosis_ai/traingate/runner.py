"""Running a dataset through a rollout server: init each rollout, wait for its callback, score it.

:func:`run_rollouts` drives ``n`` rollouts per row with at most ``concurrency`` in flight. Every
rollout ends in a status: ``COMPLETED``/``ERROR`` as reported by the rollout server, or an
infrastructure failure — ``INIT_FAILED`` (init answered with another status than 200/202),
``UNREACHABLE`` (no answer), ``TIMEOUT`` (no ``/v1/rollout/completed`` before the deadline).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai.traingate.gateway import TrainGate
from osmosis_ai.traingate.launcher import InitRejected, RolloutLauncher, ServerUnreachable
from osmosis_ai.traingate.reward import RewardFn, compute_reward
from osmosis_ai.traingate.session import RolloutSession

logger = logging.getLogger(__name__)


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
        session.reward = session.agent_reward
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
        init = await launcher.init(request)
    except (InitRejected, ServerUnreachable) as exc:
        session.initialized.set()
        session.finish("INIT_FAILED" if isinstance(exc, InitRejected) else "UNREACHABLE", str(exc))
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


async def run_rollouts(
    gate: TrainGate,
    rows: Sequence[dict[str, Any]],
    config: RunConfig,
    *,
    on_done: Callable[[RolloutSession], Awaitable[None] | None] | None = None,
) -> list[RolloutSession]:
    """Run ``config.n`` rollouts of every row against ``config.server_url``; return the sessions in order.

    ``on_done(session)`` is called as each rollout ends and awaited if it returns an awaitable; the
    rollout's concurrency slot is held meanwhile, so a slow consumer (a record writer) slows the run
    instead of piling up finished rollouts in memory.
    """
    semaphore = asyncio.Semaphore(config.concurrency)
    sessions = [
        gate.open_session(
            f"tg-{config.run_id}-r{row_index}-s{sample}",
            row_messages(row),
            row_index=row_index,
            sample_index=sample,
            metadata=row_metadata(row, row_index, sample),
        )
        for row_index, row in enumerate(rows)
        for sample in range(config.n)
    ]

    async with RolloutLauncher(
        config.server_url, api_key=config.server_api_key, max_connections=max(config.concurrency, 1)
    ) as launcher:

        async def guarded(session: RolloutSession) -> None:
            async with semaphore:
                await _run_one(gate, launcher, config, session, rows[session.row_index])
                if on_done is not None:
                    result = on_done(session)
                    if result is not None:
                        await result

        await asyncio.gather(*(guarded(s) for s in sessions))
    return sessions
