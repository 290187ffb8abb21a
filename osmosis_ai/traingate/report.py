"""Summaries of a run: status counts, rewards, turns, latency percentiles, protocol violations.

:func:`summarize` is pure data (used by tests and ``--output`` consumers); :func:`render_summary`
is the console report of ``osmosis rollout run``, drawn with rich on the console it is given.
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
from typing import TYPE_CHECKING, Any, TextIO

from osmosis_ai.traingate.session import INFRA_STATUSES, TERMINAL_STATUSES, RolloutSession

if TYPE_CHECKING:
    from rich.console import Console


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

    @property
    def all_terminal(self) -> bool:
        return sum(self.statuses.get(s, 0) for s in TERMINAL_STATUSES) == self.rollouts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(sessions: Sequence[RolloutSession], wall_s: float) -> RunSummary:
    rewards = [s.reward for s in sessions if s.reward is not None]
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


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _last_content(messages: Sequence[dict[str, Any]], role: str) -> str:
    content = next((m.get("content") for m in reversed(messages) if m.get("role") == role), None)
    return " ".join(str(content or "").split())


def render_rollouts(sessions: Sequence[RolloutSession], console: Console) -> None:
    """Print one row per rollout: status, reward, turns, token counts and the final answer."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Rollouts (tokens: generated / whole trajectory)", title_justify="left")
    table.add_column("row", justify="right")
    table.add_column("status", min_width=9)
    table.add_column("reward", justify="right", min_width=6)
    table.add_column("turns", justify="right", min_width=5)
    table.add_column("tokens", justify="right", min_width=9)
    table.add_column("final answer", overflow="ellipsis", no_wrap=True, max_width=26)
    for session in sorted(sessions, key=lambda s: (s.row_index, s.sample_index)):
        reward = "-" if session.reward is None else f"{session.reward:.3f}"
        table.add_row(
            str(session.row_index),
            session.status,
            reward,
            str(session.num_turns),
            f"{session.completion_tokens}/{session.context_tokens}",
            escape(_last_content(session.final_messages, "assistant")),
        )
    console.print(table)


def render_summary(summary: RunSummary, sessions: Sequence[RolloutSession], console: Console) -> None:
    """Print the run's summary table, then the first append-only violations and agent errors.

    Infrastructure failures are left to the caller, which turns them into the command's error."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Rollout run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    statuses = ", ".join(f"{name} {count}" for name, count in sorted(summary.statuses.items()))
    table.add_row("rollouts", f"{summary.rollouts} ({statuses})")
    reward = "-" if summary.mean_reward is None else f"{summary.mean_reward:.3f} over {summary.rewarded}"
    table.add_row("mean reward", reward)
    table.add_row("mean turns", f"{summary.mean_turns:.2f}")
    lat = summary.latency_ms
    table.add_row("latency p50 / p90 / p99", f"{_ms(lat['p50'])} / {_ms(lat['p90'])} / {_ms(lat['p99'])}")
    table.add_row("throughput", f"{summary.rollouts_per_s:.1f} rollouts/s ({summary.wall_s:.2f} s wall)")
    violations = f"{summary.violations} in {summary.rollouts_with_violations} rollout(s)"
    table.add_row("append-only violations", violations, style="red" if summary.violations else None)
    if summary.rejected_calls or summary.gateway_errors:
        table.add_row(
            "refused calls / gateway errors",
            f"{summary.rejected_calls} / {summary.gateway_errors}",
            style="yellow",
        )
    first_error = next((e for s in sessions for e in s.errors), None)
    if first_error:
        table.add_row("first gateway error", escape(first_error), style="yellow")
    if summary.reward_errors:
        first = next(s.reward_error for s in sessions if s.reward_error)
        table.add_row(
            "reward errors", f"{summary.reward_errors} (first: {escape(first or '')})", style="yellow"
        )
    console.print(table)
    shown = 0
    for session in sessions:
        for violation in session.violations:
            if shown < 5:
                console.print(
                    f"[red]append-only[/red] {escape(session.rollout_id)}: {escape(violation.describe())}"
                )
            shown += 1
    if shown > 5:
        console.print(f"... and {shown - 5} more append-only violation(s); see --output for all of them")
    errors = [s for s in sessions if s.status == "ERROR"]
    for session in errors[:3]:
        message = escape(session.error_message or "(no error message)")
        console.print(
            f"[yellow]agent error[/yellow] {escape(session.rollout_id)}: {message}", highlight=False
        )
    if len(errors) > 3:
        console.print(f"... and {len(errors) - 3} more rollout(s) ended in ERROR; see --output")
    if errors:
        console.print("(agent tracebacks are logged with --verbose)")
