"""Summaries of a run (outcome and status counts, rewards, turns, latency percentiles, protocol violations) and
the per-rollout record file.

:func:`summarize` is pure data; ``osmosis rollout run`` draws it (``osmosis_ai.cli.commands.rollout``).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from osmosis_ai.evaluation.outcome import Outcome, OutcomeCounts
from osmosis_ai.traingate.session import INFRA_STATUSES, TERMINAL_STATUSES, RolloutSession


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of ``values`` (``None`` when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class RunSummary:
    """Aggregate figures of a run."""

    rollouts: int
    statuses: dict[str, int]
    mean_reward: float | None
    rewarded: int
    mean_turns: float
    latency_ms: dict[str, float | None]
    wall_s: float
    rollouts_per_s: float
    violations: int
    rollouts_with_violations: int
    rejected_calls: int
    gateway_errors: int
    reward_errors: int
    infra_failures: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def outcome_counts(self) -> OutcomeCounts:
        return OutcomeCounts({Outcome(name): n for name, n in self.outcomes.items() if n})

    @property
    def all_terminal(self) -> bool:
        return sum(self.statuses.get(s, 0) for s in TERMINAL_STATUSES) == self.rollouts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(sessions: Sequence[RolloutSession], wall_s: float) -> RunSummary:
    """The figures of a run. Rewards are averaged over completed rollouts only: a rollout that
    failed has no score, so a failure never counts as a reward of 0 (or as the agent's own reward)."""
    outcomes = OutcomeCounts.of(s.outcome for s in sessions)
    rewards = [s.reward for s in sessions if s.reward is not None and s.outcome is Outcome.COMPLETED]
    latencies = [s.latency_ms for s in sessions if s.status in TERMINAL_STATUSES]
    infra = Counter(s.error_message or s.status for s in sessions if s.status in INFRA_STATUSES)
    return RunSummary(
        rollouts=len(sessions),
        statuses=dict(Counter(s.status for s in sessions)),
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
        rewarded=len(rewards),
        mean_turns=sum(s.num_turns for s in sessions) / len(sessions) if sessions else 0.0,
        latency_ms={f"p{int(q * 100)}": percentile(latencies, q) for q in (0.5, 0.9, 0.99)},
        wall_s=wall_s,
        rollouts_per_s=len(latencies) / wall_s if wall_s > 0 else 0.0,
        violations=sum(len(s.violations) for s in sessions),
        rollouts_with_violations=sum(1 for s in sessions if s.violations),
        rejected_calls=sum(len(s.rejected) for s in sessions),
        gateway_errors=sum(len(s.errors) for s in sessions),
        reward_errors=sum(1 for s in sessions if s.reward_error),
        infra_failures=[f"{count} x {message}" for message, count in infra.most_common(5)],
        outcomes=outcomes.to_dict(),
    )


def encode_record(record: dict[str, Any]) -> str:
    """One JSON line for a rollout record, its ``turns`` last.

    The turns carry nearly all the bytes (token ids); encoding them one by one lets a writer thread
    hand the GIL back to the event loop between turns instead of holding it for the whole record.
    """
    head = json.dumps({k: v for k, v in record.items() if k != "turns"}, ensure_ascii=False)
    turns = ", ".join(json.dumps(turn, ensure_ascii=False) for turn in record.get("turns", ()))
    return f'{head[:-1]}, "turns": [{turns}]}}'


class RecordWriter:
    """Writes one JSON line per rollout as soon as it ends, so a long run keeps what it has done.

    Lines are encoded and written by one writer thread, in the order :meth:`write` was called, so a
    big record (megabytes of token ids) never stalls the event loop the rollouts share.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._handle: TextIO | None = None
        self._thread: ThreadPoolExecutor | None = None

    def __enter__(self) -> RecordWriter:
        self._handle = self.path.open("w", encoding="utf-8")
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="osmosis-records")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=True)  # lines already handed over are still written
            self._thread = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    async def write(self, session: RolloutSession) -> None:
        """Write ``session``'s record; returns once the line is flushed to the file."""
        if self._handle is None or self._thread is None:
            raise RuntimeError("RecordWriter used outside 'with'")
        record = session.to_record()  # a shallow snapshot, taken on the loop that mutates sessions
        await asyncio.get_running_loop().run_in_executor(self._thread, _write_line, self._handle, record)
        self.count += 1


def _write_line(handle: TextIO, record: dict[str, Any]) -> None:
    handle.write(encode_record(record) + "\n")
    handle.flush()
