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
from osmosis_ai.evaluation.statistics import ScoreTally
from osmosis_ai.traingate.drift import DriftTally
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


MAX_FAILURE_KINDS = 100  # distinct infrastructure messages counted; the rest are lumped together
EXAMPLES = 5  # failures of each kind kept for the report


@dataclass(frozen=True)
class Example:
    """One failure to show in the report: the rollout and what went wrong."""

    rollout_id: str
    outcome: Outcome
    detail: str


class RunTally:
    """A run's figures, accumulated one finished rollout at a time, so no rollout has to be kept.

    Keeps a float per rollout (its latency, for the percentiles), the rewards summed per row (for
    the mean's interval and pass@k) and a few examples of each kind of failure; everything else is
    a counter.
    """

    def __init__(self, keep_sessions: int = 0) -> None:
        self.keep_sessions = keep_sessions
        self.sessions: list[RolloutSession] = []  # the first ``keep_sessions`` (in finishing order)
        self.rollouts = 0
        self.outcomes: Counter[Outcome] = Counter()
        self.statuses: Counter[str] = Counter()
        self.scores = ScoreTally()  # completed rollouts' rewards, per row
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.counted_tokens = False  # whether any turn reported usage
        self.turns = 0
        self.latencies: list[float] = []
        self.violations = 0
        self.rollouts_with_violations = 0
        self.rejected_calls = 0
        self.gateway_errors = 0
        self.reward_errors = 0
        self.infra: Counter[str] = Counter()
        self.first_failure: Example | None = None
        self.first_gateway_error: str | None = None
        self.first_reward_error: str | None = None
        self.violation_examples: list[Example] = []
        self.agent_errors: list[Example] = []
        self.agent_error_count = 0
        self.drift = DriftTally()

    def add(self, session: RolloutSession) -> None:
        """Count a finished rollout (before its per-turn data is released: only counts are read)."""
        self.rollouts += 1
        self.drift.add(session.rollout_id, session.drift_events, traced=session.trace is not None)
        if len(self.sessions) < self.keep_sessions:
            self.sessions.append(session)
        outcome = session.outcome
        self.outcomes[outcome] += 1
        self.statuses[session.status] += 1
        if session.reward is not None and outcome is Outcome.COMPLETED:
            self.scores.add(session.row_index, session.reward)
        for turn in session.turns:
            self.prompt_tokens += int(turn.usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(turn.usage.get("completion_tokens") or 0)
            self.counted_tokens = True
        self.turns += session.num_turns
        if session.status in TERMINAL_STATUSES:
            self.latencies.append(session.latency_ms)
        self.violations += len(session.violations)
        self.rollouts_with_violations += bool(session.violations)
        for violation in session.violations:
            if len(self.violation_examples) < EXAMPLES:
                self.violation_examples.append(Example(session.rollout_id, outcome, violation.describe()))
        self.rejected_calls += len(session.rejected)
        self.gateway_errors += len(session.errors)
        if session.errors and self.first_gateway_error is None:
            self.first_gateway_error = session.errors[0]
        if session.reward_error:
            self.reward_errors += 1
            self.first_reward_error = self.first_reward_error or session.reward_error
        if session.status in INFRA_STATUSES:
            message = session.error_message or session.status
            if message in self.infra or len(self.infra) < MAX_FAILURE_KINDS:
                self.infra[message] += 1
            else:
                self.infra["(other infrastructure failures)"] += 1
        if session.status == "ERROR":
            self.agent_error_count += 1
            if len(self.agent_errors) < EXAMPLES:
                why = session.error_message or "(no error message)"
                self.agent_errors.append(Example(session.rollout_id, outcome, why))
        if outcome is not Outcome.COMPLETED and self.first_failure is None:
            why = (
                session.reward_error
                or session.error_message
                or (session.errors[-1] if session.errors else "")
            )
            if outcome is Outcome.NO_MODEL_CALLS:
                why = "the agent finished without calling the model"
            self.first_failure = Example(session.rollout_id, outcome, " ".join(str(why).split()))

    def summary(self, wall_s: float) -> RunSummary:
        """The figures of the run so far. Rewards are averaged over completed rollouts only: a
        rollout that failed has no score, so a failure never counts as a reward of 0."""
        scored, latencies = self.scores.scored, self.latencies
        return RunSummary(
            rollouts=self.rollouts,
            statuses=dict(self.statuses),
            mean_reward=self.scores.total / scored if scored else None,
            rewarded=scored,
            mean_turns=self.turns / self.rollouts if self.rollouts else 0.0,
            latency_ms={f"p{int(q * 100)}": percentile(latencies, q) for q in (0.5, 0.9, 0.99)},
            wall_s=wall_s,
            rollouts_per_s=len(latencies) / wall_s if wall_s > 0 else 0.0,
            violations=self.violations,
            rollouts_with_violations=self.rollouts_with_violations,
            rejected_calls=self.rejected_calls,
            gateway_errors=self.gateway_errors,
            reward_errors=self.reward_errors,
            infra_failures=[f"{count} x {message}" for message, count in self.infra.most_common(5)],
            outcomes=OutcomeCounts(dict(self.outcomes)).to_dict(),
        )


def summarize(sessions: Sequence[RolloutSession], wall_s: float) -> RunSummary:
    """The figures of a run whose sessions were all kept (see :class:`RunTally`)."""
    tally = RunTally()
    for session in sessions:
        tally.add(session)
    return tally.summary(wall_s)


def encode_record(record: dict[str, Any]) -> str:
    """One JSON line for a rollout record, its ``turns`` last.

    The turns carry nearly all the bytes (token ids); encoding them one by one lets a writer thread
    hand the GIL back to the event loop between turns instead of holding it for the whole record.
    """
    head = _dumps({k: v for k, v in record.items() if k != "turns"})
    turns = ", ".join(_dumps(turn) for turn in record.get("turns", ()))
    return f'{head[:-1]}, "turns": [{turns}]}}'


def _dumps(value: Any) -> str:
    """Strict JSON: a non-finite number (which json would write as the non-JSON ``NaN``) becomes null."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class RecordWriter:
    """Writes one JSON line per rollout as soon as it ends, so a long run keeps what it has done.

    Lines are encoded and written by one writer thread, in the order :meth:`write` was called, so a
    big record (megabytes of token ids) never stalls the event loop the rollouts share. A failed
    write (a full disk) raises its :class:`OSError` and is kept in :attr:`error`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self.error: OSError | None = None
        self._handle: TextIO | None = None
        self._thread: ThreadPoolExecutor | None = None

    def __enter__(self) -> RecordWriter:
        try:
            self._handle = self.path.open("w", encoding="utf-8")
        except OSError as exc:
            self.error = exc
            raise
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="osmosis-records")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=True)  # lines already handed over are still written
            self._thread = None
        if self._handle is not None:
            if self.error is None:
                self._write_remaining(self._handle)
            handle, self._handle = self._handle, None
            try:
                handle.close()
            except OSError as exc:
                if self.error is None:  # the first failure is the one to report
                    self.error = exc
                    raise

    def _write_remaining(self, handle: TextIO) -> None:
        """At the end, write what is still held back (nothing here; see :class:`OrderedRecordWriter`)."""

    async def write(self, session: RolloutSession) -> None:
        """Write ``session``'s record; returns once the line is flushed to the file."""
        await self._write(session.to_record())  # a shallow snapshot, taken on the loop that mutates sessions

    async def _write(self, *records: dict[str, Any]) -> None:
        if self._handle is None or self._thread is None:
            raise RuntimeError("RecordWriter used outside 'with'")
        try:
            await asyncio.get_running_loop().run_in_executor(
                self._thread, _write_lines, self._handle, records
            )
        except OSError as exc:
            self.error = exc
            raise
        self.count += len(records)


class OrderedRecordWriter(RecordWriter):
    """Writes the records in sequence order — (row, sample) — whatever order the rollouts end in.

    A record that ends before an earlier one waits in memory until every earlier record is written
    (if the run ends first, the waiting records are written at the exit, in order, with gaps).
    :meth:`admit` holds back the start of rollout ``seq`` until fewer than ``window`` records are
    ahead of the first unwritten one, so at most ``window`` records ever wait: memory stays bounded,
    at the price of a pause when one rollout is far slower than the ``window`` after it.
    """

    def __init__(self, path: str | Path, *, window: int) -> None:
        super().__init__(path)
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self._pending: dict[int, dict[str, Any]] = {}
        self._next = 0
        self._moved = asyncio.Condition()
        self._draining = asyncio.Lock()

    def _write_remaining(self, handle: TextIO) -> None:
        # The run ended early (Ctrl-C, an error): keep the records that finished, still in order,
        # with gaps where rollouts did not finish.
        remaining = [self._pending.pop(seq) for seq in sorted(self._pending)]
        if not remaining:
            return
        try:
            _write_lines(handle, remaining)
        except OSError as exc:
            self.error = exc
            raise
        self.count += len(remaining)

    @property
    def waiting(self) -> int:
        """Records ended but not yet written (waiting for an earlier one)."""
        return len(self._pending)

    async def admit(self, seq: int) -> None:
        """Return once rollout ``seq`` may start without more than ``window`` records waiting."""
        async with self._moved:
            await self._moved.wait_for(lambda: seq < self._next + self.window)

    async def put(self, seq: int, session: RolloutSession) -> None:
        """Hand over the record of rollout ``seq``; every record whose turn has come is written."""
        self._pending[seq] = session.to_record()
        if seq != self._next or self._draining.locked():
            # Not this record's turn, or a drain is running and will reach it: do not wait (and
            # hold a rollout slot) for the writes of others.
            return
        async with self._draining:
            while self._next in self._pending:
                ready: list[
                    dict[str, Any]
                ] = []  # every record whose turn has come, handed to the writer thread at once
                while self._next + len(ready) in self._pending:
                    ready.append(self._pending.pop(self._next + len(ready)))
                await self._write(*ready)
                self._next += len(ready)
                async with self._moved:
                    self._moved.notify_all()


def _write_lines(handle: TextIO, records: Sequence[dict[str, Any]]) -> None:
    for record in records:
        handle.write(encode_record(record) + "\n")
    handle.flush()
