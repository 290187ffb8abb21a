"""The shape every results file is read into: a :class:`Run` of :class:`Row` s.

A row is one unit of work (one rollout, one test row, one eval run of a row, one judgment of a
record), keyed by ``(row, sample)`` so that two runs over the same dataset can be paired. Its
``score`` is the figure the run is about — the reward, the first eval function's score or the
judge's score — and is only meaningful for ``completed`` rows: other rows are counted, never
scored. The trajectory is kept as plain JSON-ready data for the page's viewer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from osmosis_ai.statistics import WinLossTie

Message = dict[str, Any]


@dataclass
class Trajectory:
    """What the viewer shows for one row; every part is optional."""

    messages: list[Message] = field(default_factory=list)
    # message index -> what the turn that produced that assistant message measured
    turns: dict[int, dict[str, Any]] = field(default_factory=dict)
    violations: list[dict[str, Any]] = field(default_factory=list)
    drift: list[dict[str, Any]] = field(default_factory=list)
    # the final token sequence as runs of [generated (1) or not (0), length]
    token_runs: list[list[int]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "turns": {str(k): v for k, v in self.turns.items()},
            "violations": self.violations,
            "drift": self.drift,
            "tokenRuns": self.token_runs,
            "extra": self.extra,
        }


@dataclass
class Row:
    """One unit of work of a run and how it ended."""

    row: int
    sample: int
    outcome: str
    label: str = ""
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    finish_reason: str | None = None
    error: str | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    trajectory: Trajectory = field(default_factory=Trajectory)

    @property
    def key(self) -> tuple[int, int]:
        return (self.row, self.sample)

    @property
    def completed(self) -> bool:
        return self.outcome == "completed"

    @property
    def scored_value(self) -> float | None:
        """The score, for a completed row only: a failed row has none, whatever the file says."""
        return self.score if self.completed else None


@dataclass
class BaselineFigure:
    """One figure a results file compares with its own baseline (``eval-rubric --baseline``)."""

    name: str
    baseline: float
    candidate: float | None


@dataclass
class PairedFigure:
    """One eval function of ``eval --baseline-model``: the primary model minus the baseline over the
    rows both completed (``interval`` None when it cannot be known, as for merged shards) and the
    rows it won, lost and tied (``record`` None in files written before those were counted)."""

    name: str
    difference: float
    interval: tuple[float, float] | None
    rows: int
    record: WinLossTie | None

    def to_dict(self) -> dict[str, Any]:
        counts = self.record.to_dict() if self.record else {"wins": None, "losses": None, "ties": None}
        interval = list(self.interval) if self.interval else None
        return {"difference": self.difference, "interval": interval, "rows": self.rows, **counts}

    def describe(self) -> str:
        """One line: the difference, its interval and the rows won, lost and tied."""
        interval = f" [{self.interval[0]:+.3f}, {self.interval[1]:+.3f}]" if self.interval else ""
        record = f"; {self.record.describe()}" if self.record else ""
        return f"{self.difference:+.3f}{interval} over {self.rows} rows{record}"


@dataclass
class Run:
    """One results file, read."""

    source: str
    kind: str  # the command that wrote it: "rollout run", "test", "eval", "eval-rubric", "reward score"
    rows: list[Row]
    score_name: str = "reward"
    pass_threshold: float = 1.0
    model: str | None = None
    baseline: list[BaselineFigure] = field(default_factory=list)
    baseline_source: str | None = None
    paired: list[PairedFigure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # what names the run apart from its rows (dataset, agent, model, ``--n``...): equal in every
    # shard of one run (``--offset``/``--limit``), so shards can be told from other runs
    identity: dict[str, Any] = field(default_factory=dict)
    previous: Run | None = None
    """For an ``osmosis regrade`` output: the same answers as the earlier grading scored them."""

    @property
    def samples_per_row(self) -> int:
        """The most samples any row has (``--n``)."""
        counts: dict[int, int] = {}
        for row in self.rows:
            counts[row.row] = counts.get(row.row, 0) + 1
        return max(counts.values(), default=0)
