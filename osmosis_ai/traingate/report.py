"""Summaries of a run (outcome and status counts, rewards, turns, latency percentiles, protocol violations,
tool errors) and the per-rollout record file.

:func:`summarize` is pure data; ``osmosis rollout run`` draws it (``osmosis_ai.cli.commands.rollout``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from osmosis_ai.outcome import Outcome, OutcomeCounts, plural
from osmosis_ai.rollout.utils import is_tool_error
from osmosis_ai.statistics import ScoreTally
from osmosis_ai.traingate.append_only import AppendOnlyViolation
from osmosis_ai.traingate.drift import DriftEvent, DriftTally
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
    tool_errors: int
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

    def outcome_line(self) -> str:
        """The one line every run prints: outcome counts beside the pass rate, the mean reward, and
        how many tool calls were answered with an error (arguments the tool rejected included)."""
        line = self.outcome_counts.describe("rollout")
        if self.mean_reward is not None:
            line += f"; mean reward {self.mean_reward:.3f} over {self.rewarded} completed"
        if self.tool_errors:
            line += f"; {self.tool_errors} tool {plural('error', self.tool_errors)}"
        return line


MAX_FAILURE_KINDS = 100  # distinct infrastructure messages counted; the rest are lumped together
EXAMPLES = 5  # failures of each kind kept for the report


@dataclass(frozen=True)
class Example:
    """One failure to show in the report: the rollout and what went wrong."""

    rollout_id: str
    outcome: Outcome
    detail: str


@dataclass(frozen=True)
class RolloutLine:
    """What the per-rollout table shows of one rollout (kept for small runs only)."""

    row_index: int
    sample_index: int
    status: str
    reward: float | None
    num_turns: int
    completion_tokens: int  # generated over every turn
    context_tokens: int  # the latest turn's prompt + completion: the trajectory a trainer sees
    answer: str


class RunTally:
    """A run's figures, accumulated one finished rollout at a time, so no rollout has to be kept.

    Keeps a float per rollout (its latency, for the percentiles), the rewards summed per row (for
    the mean's interval and pass@k) and a few examples of each kind of failure; everything else is
    a counter. A rollout is counted from its record (``RolloutSession.to_record``), so a rollout a
    resumed run reads back from its journal counts exactly as one it ran.
    """

    def __init__(self, keep_lines: int = 0, keep_records: int = 0, pass_threshold: float = 1.0) -> None:
        self.keep_lines = keep_lines
        self.keep_records = keep_records
        self.lines: list[RolloutLine] = []  # the first ``keep_lines`` (in finishing order)
        # The first ``keep_records`` records, without their token data (what a report reads).
        self.records: list[dict[str, Any]] = []
        self.rollouts = 0
        self.replayed = 0  # rollouts read back from a journal rather than run
        self.replayed_terminal = 0
        self.outcomes: Counter[Outcome] = Counter()
        self.statuses: Counter[str] = Counter()
        self.scores = ScoreTally(pass_threshold)  # completed rollouts' rewards, per row
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
        self.tool_errors = 0  # tool messages reporting a failure, arguments the tool rejected included
        self.infra: Counter[str] = Counter()
        self.first_failure: Example | None = None
        self.first_gateway_error: str | None = None
        self.first_reward_error: str | None = None
        self.first_tool_error: str | None = None
        self.violation_examples: list[Example] = []
        self.agent_errors: list[Example] = []
        self.agent_error_count = 0
        self.drift = DriftTally()

    def first_failure_note(self) -> str:
        """``"; first: <rollout id> (<outcome>): <why>"`` for the first failed rollout, to start the diagnosis."""
        first = self.first_failure
        if first is None or not first.detail:
            return ""
        return f"; first: {first.rollout_id} ({first.outcome.value}): {first.detail[:200]}"

    def add(self, session: RolloutSession) -> None:
        """Count a finished rollout (before its per-turn data is released)."""
        self.add_record(session.to_record())

    def add_record(self, record: dict[str, Any], *, replayed: bool = False) -> None:
        """Count a finished rollout from its record; ``replayed`` when it was not run by this run
        (it then counts everywhere but in the throughput)."""
        self.rollouts += 1
        rollout_id, status = str(record["rollout_id"]), str(record["status"])
        outcome = Outcome(record["outcome"])
        turns = record.get("turns") or []
        events = [DriftEvent(**event) for event in record.get("drift_events") or ()]
        self.drift.add(rollout_id, events, traced="drift_events" in record)
        self._keep(record, turns)
        self.replayed += replayed
        self.outcomes[outcome] += 1
        self.statuses[status] += 1
        reward = record.get("reward")
        if reward is not None and outcome is Outcome.COMPLETED:
            self.scores.add(int(record["row_index"]), float(reward))
        for turn in turns:
            self.prompt_tokens += int(turn["usage"].get("prompt_tokens") or 0)
            self.completion_tokens += int(turn["usage"].get("completion_tokens") or 0)
            self.counted_tokens = True
        self.turns += len(turns)
        if status in TERMINAL_STATUSES:
            self.latencies.append(float(record["latency_ms"]))
            self.replayed_terminal += replayed
        self._count_protocol(record, rollout_id, outcome)
        self._count_failure(record, rollout_id, status, outcome)

    def _count_protocol(self, record: dict[str, Any], rollout_id: str, outcome: Outcome) -> None:
        """Append-only violations, refused calls and gateway errors: what the TrainGate checked."""
        violations = record.get("append_only_violations") or []
        self.violations += len(violations)
        self.rollouts_with_violations += bool(violations)
        for violation in violations:
            if len(self.violation_examples) < EXAMPLES:
                why = AppendOnlyViolation(**violation).describe()
                self.violation_examples.append(Example(rollout_id, outcome, why))
        self.rejected_calls += len(record.get("rejected_calls") or ())
        errors = record.get("gateway_errors") or []
        self.gateway_errors += len(errors)
        if errors and self.first_gateway_error is None:
            self.first_gateway_error = errors[0]

    def _count_failure(self, record: dict[str, Any], rollout_id: str, status: str, outcome: Outcome) -> None:
        """Reward errors, tool errors, infrastructure failures by kind, agent errors and the run's first failure."""
        reward_error, error_message = record.get("reward_error"), record.get("error_message")
        failed_tools = [
            m for m in record.get("final_messages") or () if isinstance(m, dict) and is_tool_error(m)
        ]
        self.tool_errors += len(failed_tools)
        if failed_tools and self.first_tool_error is None:
            self.first_tool_error = " ".join(str(failed_tools[0]["content"]).split())
        if reward_error:
            self.reward_errors += 1
            self.first_reward_error = self.first_reward_error or reward_error
        if status in INFRA_STATUSES or outcome is Outcome.INFRA_ERROR:
            message = error_message or status
            if message in self.infra or len(self.infra) < MAX_FAILURE_KINDS:
                self.infra[message] += 1
            else:
                self.infra["(other infrastructure failures)"] += 1
        if status == "ERROR":
            self.agent_error_count += 1
            if len(self.agent_errors) < EXAMPLES:
                self.agent_errors.append(Example(rollout_id, outcome, error_message or "(no error message)"))
        if outcome is not Outcome.COMPLETED and self.first_failure is None:
            errors = record.get("gateway_errors") or []
            why = reward_error or error_message or (errors[-1] if errors else "")
            if outcome is Outcome.NO_MODEL_CALLS:
                why = "the agent finished without calling the model"
            self.first_failure = Example(rollout_id, outcome, " ".join(str(why).split()))

    def _keep(self, record: dict[str, Any], turns: list[dict[str, Any]]) -> None:
        if len(self.lines) < self.keep_lines:
            last = turns[-1] if turns else None
            answer = next((m.get("content") for m in reversed(record.get("final_messages") or [])
                           if m.get("role") == "assistant"), None)  # fmt: skip
            self.lines.append(
                RolloutLine(
                    row_index=int(record["row_index"]),
                    sample_index=int(record["sample_index"]),
                    status=str(record["status"]),
                    reward=record.get("reward"),
                    num_turns=len(turns),
                    completion_tokens=sum(len(t["token_ids"]) for t in turns),
                    context_tokens=len(last["prompt_token_ids"]) + len(last["token_ids"]) if last else 0,
                    answer=" ".join(str(answer or "").split()),
                )
            )
        if len(self.records) < self.keep_records:
            light = {**record, "turns": []}
            if "trajectory" in light:
                light["trajectory"] = {"token_ids": [], "loss_mask": []}
            self.records.append(light)

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
            # Throughput of what this run ran: rollouts read back from a journal took no time here.
            rollouts_per_s=(len(latencies) - self.replayed_terminal) / wall_s if wall_s > 0 else 0.0,
            violations=self.violations,
            rollouts_with_violations=self.rollouts_with_violations,
            rejected_calls=self.rejected_calls,
            gateway_errors=self.gateway_errors,
            reward_errors=self.reward_errors,
            tool_errors=self.tool_errors,
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
    """One JSON line for a rollout record, its ``turns`` (nearly all the bytes: token ids) last."""
    ordered = {k: v for k, v in record.items() if k != "turns"}
    ordered["turns"] = record.get("turns", [])
    return _dumps(ordered)


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


# The records a resumed run already has (from its journal) for sequence numbers start <= seq < stop,
# in order; called in the writer thread, and read lazily there.
Premade = Callable[[int, int], Iterable[dict[str, Any]]]


class OrderedRecordWriter:
    """Writes the records in sequence order — (row, sample) — whatever order the rollouts end in.

    A record that ends before an earlier one waits in memory until every earlier record is written
    (if the run ends first, the waiting records are written at the exit, in order, with gaps).
    :meth:`admit` holds back the start of rollout ``seq`` until fewer than ``window`` records are
    ahead of the first unwritten one, so at most ``window`` records ever wait: memory stays bounded,
    at the price of a pause when one rollout is far slower than the ``window`` after it.

    Lines are encoded and written by one writer thread, so a big record (megabytes of token ids)
    never stalls the event loop the rollouts share. A failed write (a full disk) raises its
    :class:`OSError` and is kept in :attr:`error`.

    A resumed run skips the rollouts its journal has; ``premade(start, stop)`` gives their records.
    Every sequence number below the last admitted one (or below :meth:`complete`'s end) that was
    not admitted is such a rollout, and its record is written in its place, read a stretch at a time
    by the writer thread, so the file comes out whole and in order.

    The file is opened on entering ``with``: by ``opener(path)`` when given (the command line's own
    rules for the files it names), else created or truncated in place.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        window: int,
        premade: Premade | None = None,
        opener: Callable[[Path], TextIO] | None = None,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self.premade = premade
        self._pending: dict[int, dict[str, Any]] = {}
        self._admitted: set[int] = set()  # admitted and not written yet
        self._decided = 0  # every sequence number below this was admitted or is premade
        self._next = 0
        self._moved = asyncio.Condition()
        self._draining = asyncio.Lock()
        self.path = Path(path)
        self.opener = opener
        self.count = 0
        self.error: OSError | None = None
        self._handle: TextIO | None = None
        self._thread: ThreadPoolExecutor | None = None

    def __enter__(self) -> OrderedRecordWriter:
        try:
            self._handle = self.opener(self.path) if self.opener else self.path.open("w", encoding="utf-8")
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
        # The run ended early (Ctrl-C, an error): keep the records that finished — those waiting and
        # the premade ones before the last admitted rollout — still in order, with gaps where
        # rollouts did not finish (a resumed run writes the whole file again).
        seq, end = self._next, max([self._decided, *(s + 1 for s in self._pending)])
        try:
            while seq < end:
                if seq in self._pending:
                    self.count += _write_lines(handle, [self._pending.pop(seq)])
                    seq += 1
                elif (stop := self._premade_end(seq)) > seq:
                    self.count += _write_lines(handle, [], self._premade_records(seq, stop))
                    seq = stop
                else:  # admitted and not finished: a gap
                    seq += 1
        except OSError as exc:
            self.error = exc
            raise

    @property
    def waiting(self) -> int:
        """Records ended but not yet written (waiting for an earlier one)."""
        return len(self._pending)

    async def admit(self, seq: int) -> None:
        """Return once rollout ``seq`` may start without more than ``window`` records waiting."""
        self._admitted.add(seq)
        self._decided = max(self._decided, seq + 1)
        await self._drain()  # premade records before ``seq`` may be due
        async with self._moved:
            await self._moved.wait_for(lambda: seq < self._next + self.window)

    async def complete(self, end: int) -> None:
        """The run is over and every rollout below ``end`` was admitted or is premade: write the rest."""
        self._decided = max(self._decided, end)
        await self._drain()

    async def put_record(self, seq: int, record: dict[str, Any]) -> None:
        """Hand over the record of rollout ``seq`` (a shallow snapshot taken on the loop that mutates
        sessions); every record whose turn has come is written."""
        self._pending[seq] = record
        if seq != self._next or self._draining.locked():
            # Not this record's turn, or a drain is running and will reach it: do not wait (and
            # hold a rollout slot) for the writes of others.
            return
        await self._drain()

    async def _write(self, *records: dict[str, Any], premade: tuple[int, int] = (0, 0)) -> None:
        """Write ``records``, then the premade records of ``premade`` = (start, stop)."""
        if self._handle is None or self._thread is None:
            raise RuntimeError("OrderedRecordWriter used outside 'with'")
        made = self._premade_records(*premade)
        try:
            written = await asyncio.get_running_loop().run_in_executor(
                self._thread, _write_lines, self._handle, [*records], made
            )
        except OSError as exc:
            self.error = exc
            raise
        self.count += written

    def _premade_records(self, start: int, stop: int) -> Iterator[dict[str, Any]]:
        if self.premade is not None and start < stop:  # a generator: the journal is read in the writer thread
            yield from self.premade(start, stop)

    def _premade_end(self, start: int) -> int:
        """The end of the stretch of premade records from ``start`` (``start`` itself if none)."""
        if (
            self.premade is None
            or start >= self._decided
            or start in self._admitted
            or start in self._pending
        ):
            return start
        later = [seq for seq in (*self._admitted, *self._pending) if seq > start]
        return min([self._decided, *later])

    async def _drain(self) -> None:
        async with self._draining:
            while True:
                # Every record whose turn has come, handed to the writer thread at once, then the
                # premade stretch that follows them.
                ready: list[dict[str, Any]] = []
                while self._next + len(ready) in self._pending:
                    ready.append(self._pending.pop(self._next + len(ready)))
                start = self._next + len(ready)
                end = self._premade_end(start)
                if not ready and end == start:
                    return
                await self._write(*ready, premade=(start, end))
                self._admitted.difference_update(range(self._next, start))
                self._next = end
                async with self._moved:
                    self._moved.notify_all()


def _write_lines(
    handle: TextIO, records: Sequence[dict[str, Any]], more: Iterable[dict[str, Any]] = ()
) -> int:
    """Write ``records`` and then ``more`` (read lazily, in the writer thread); return how many."""
    written = 0
    for record in itertools.chain(records, more):
        handle.write(encode_record(record) + "\n")
        written += 1
    handle.flush()
    return written
