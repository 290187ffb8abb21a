"""The summary figures of a run and the per-row comparison of two runs.

Scores are summarised over completed rows only (a failed row has no score, it is counted): the
mean is the mean of per-row means with a bootstrap interval over rows, and pass@k (a sample passes
when its score is at least the run's threshold) is given for every ``k`` up to the samples per row
when rows have more than one — the same estimators ``osmosis eval`` reports
(:mod:`osmosis_ai.statistics`), so the page and the command agree. A ``k`` some scored row has too
few completed samples for is not estimated: it is listed in ``pass_at_k_gaps`` (``k`` -> rows short),
shown as "–" with the reason, and as ``null`` in ``pass_at_k`` with the reason in ``pass_at_k_missing``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from osmosis_ai.outcome import Outcome
from osmosis_ai.report.cost import estimated_cost
from osmosis_ai.report.model import Row, Run
from osmosis_ai.rollout.utils import is_tool_error
from osmosis_ai.statistics import (
    Estimate,
    ScoreTally,
    WinLossTie,
    paired_difference,
    pass_at_k_gap_text,
)
from osmosis_ai.traingate.report import percentile

PERCENTILES = (0.5, 0.9, 0.99)


def pass_at_k_json(pass_at_k: dict[int, Estimate], gaps: dict[int, int]) -> dict[str, Any]:
    """``pass_at_k`` (every ``k``, ``null`` where not estimated) and ``pass_at_k_missing`` (why not)."""
    table: dict[str, Any] = {str(k): e.to_dict() for k, e in pass_at_k.items()}
    table |= {str(k): None for k in gaps}
    missing = {str(k): pass_at_k_gap_text(k, short) for k, short in gaps.items()}
    return {"pass_at_k": table, "pass_at_k_missing": missing}


@dataclass
class ScoreFigures:
    """The mean and pass@k of one named score."""

    scored: int
    mean: Estimate | None
    pass_at_k: dict[int, Estimate]
    pass_at_k_gaps: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scored": self.scored,
            "mean_score": self.mean.to_dict() if self.mean else None,
            **pass_at_k_json(self.pass_at_k, self.pass_at_k_gaps),
        }


@dataclass
class Summary:
    """What the top of the report (and the terminal summary) says about one run."""

    rows: int
    outcomes: dict[str, int]
    scored: int
    mean_score: Estimate | None
    pass_at_k: dict[int, Estimate]
    latency_ms: dict[str, float | None]
    prompt_tokens: int | None
    completion_tokens: int | None
    violations: int
    drift_events: int
    cost_usd: float | None = None
    # tool messages reporting a failure (a tool that raised, timed out or rejected its arguments)
    tool_errors: int = 0
    # the dataset rows behind ``rows`` (a row run ``--n`` times counts once), when known
    dataset_rows: int | None = None
    samples_per_row: int = 1
    # every score the rows carry besides the run's own (``eval``'s other eval functions)
    other_scores: dict[str, ScoreFigures] = field(default_factory=dict)
    # k -> scored rows with fewer than k completed samples, for the k that pass_at_k leaves out
    pass_at_k_gaps: dict[int, int] = field(default_factory=dict)

    @property
    def completed(self) -> int:
        return self.outcomes.get(Outcome.COMPLETED.value, 0)

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "outcomes": self.outcomes,
            "completed": self.completed,
            "scored": self.scored,
            "mean_score": self.mean_score.to_dict() if self.mean_score else None,
            **pass_at_k_json(self.pass_at_k, self.pass_at_k_gaps),
            "latency_ms": self.latency_ms,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "append_only_violations": self.violations,
            "drift_events": self.drift_events,
            "tool_errors": self.tool_errors,
            "estimated_cost_usd": self.cost_usd,
            "dataset_rows": self.dataset_rows,
            "samples_per_row": self.samples_per_row,
            "other_scores": {name: figures.to_dict() for name, figures in self.other_scores.items()},
        }


def outcome_counts(rows: list[Row]) -> dict[str, int]:
    """Every known outcome (zeros included, in the model's order), then any unknown ones the file had."""
    counts = Counter(row.outcome for row in rows)
    known = {o.value: counts.pop(o.value, 0) for o in Outcome}
    return {**known, **dict(sorted(counts.items()))}


def scores_by_row(rows: list[Row]) -> dict[int, list[float]]:
    """The scores of the completed samples of each row."""
    by_row: dict[int, list[float]] = {}
    for row in rows:
        if (value := row.scored_value) is not None:
            by_row.setdefault(row.row, []).append(value)
    return by_row


def _token_total(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def summary_of(
    *,
    outcomes: dict[str, int],
    scores: ScoreTally,
    samples_per_row: int,
    latencies_ms: list[float],
    prompt_tokens: int | None,
    completion_tokens: int | None,
    violations: int = 0,
    drift_events: int = 0,
    model: str | None = None,
    price: bool = True,
    other_scores: dict[str, ScoreTally] | None = None,
    dataset_rows: int | None = None,
    tool_errors: int = 0,
) -> Summary:
    """A summary from running totals, for a command that counted its run instead of keeping it."""
    return Summary(
        rows=sum(outcomes.values()),
        outcomes=outcomes,
        scored=scores.scored,
        mean_score=scores.mean(),
        pass_at_k=scores.pass_at_k(samples_per_row),
        pass_at_k_gaps=scores.pass_at_k_gaps(samples_per_row),
        latency_ms={f"p{round(q * 100)}": percentile(latencies_ms, q) for q in PERCENTILES},
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        violations=violations,
        drift_events=drift_events,
        tool_errors=tool_errors,
        cost_usd=estimated_cost(model, prompt_tokens, completion_tokens) if price else None,
        dataset_rows=dataset_rows,
        samples_per_row=samples_per_row,
        other_scores={
            name: ScoreFigures(
                tally.scored,
                tally.mean(),
                tally.pass_at_k(samples_per_row),
                tally.pass_at_k_gaps(samples_per_row),
            )
            for name, tally in (other_scores or {}).items()
        },
    )


def summarize(run: Run, *, price: bool = True) -> Summary:
    """The figures of ``run``; with ``price``, the estimated cost too (which may import LiteLLM)."""
    scores = ScoreTally(run.pass_threshold)
    others: dict[str, ScoreTally] = {}
    for row in run.rows:
        if (value := row.scored_value) is not None:
            scores.add(row.row, value)
        if row.completed:
            for name, other in row.scores.items():
                if name != run.score_name:
                    others.setdefault(name, ScoreTally(run.pass_threshold)).add(row.row, other)
    return summary_of(
        outcomes=outcome_counts(run.rows),
        scores=scores,
        samples_per_row=run.samples_per_row,
        latencies_ms=[row.latency_ms for row in run.rows if row.latency_ms is not None],
        prompt_tokens=_token_total([row.prompt_tokens for row in run.rows]),
        completion_tokens=_token_total([row.completion_tokens for row in run.rows]),
        violations=sum(len(row.trajectory.violations) for row in run.rows),
        drift_events=sum(len(row.trajectory.drift) for row in run.rows),
        model=run.model,
        price=price,
        other_scores=others,
        dataset_rows=len({row.row for row in run.rows}),
        tool_errors=sum(is_tool_error(m) for row in run.rows for m in row.trajectory.messages),
    )


@dataclass
class RowChange:
    """One ``(row, sample)`` as two runs saw it."""

    key: tuple[int, int]
    before: Row | None
    after: Row | None

    @property
    def delta(self) -> float | None:
        return _difference(
            self.before.scored_value if self.before else None, self.after.scored_value if self.after else None
        )

    @property
    def outcome_changed(self) -> bool:
        return (self.before and self.before.outcome) != (self.after and self.after.outcome)


def _difference(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


class _Change(Protocol):
    @property
    def delta(self) -> float | None: ...

    @property
    def outcome_changed(self) -> bool: ...


ChangeT = TypeVar("ChangeT", bound=_Change)


@dataclass
class _Changes(Generic[ChangeT]):
    """Run ``after`` against run ``before``: the changes, their mean difference and their tallies."""

    before: Run
    after: Run
    changes: list[ChangeT] = field(default_factory=list)
    mean_difference: Estimate | None = None

    @property
    def record(self) -> WinLossTie:
        """The changes scored in both runs, counted by which run scored higher (``wins``: ``after``)."""
        return WinLossTie.of(c.delta for c in self.changes if c.delta is not None)

    @property
    def improved(self) -> int:
        return self.record.wins

    @property
    def worse(self) -> int:
        return self.record.losses

    @property
    def outcome_changes(self) -> int:
        return sum(1 for c in self.changes if c.outcome_changed)


@dataclass
class Comparison(_Changes[RowChange]):
    """Run ``after`` against run ``before``, ``(row, sample)`` against ``(row, sample)``."""


def _row_mean_difference(before: Run, after: Run) -> Estimate | None:
    """The paired difference of the per-row mean scores over the rows scored in both runs (per-row
    means, so rows with more samples do not weigh more); ``None`` when no row is."""
    a, b = scores_by_row(before.rows), scores_by_row(after.rows)
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    return paired_difference([sum(b[r]) / len(b[r]) for r in shared], [sum(a[r]) / len(a[r]) for r in shared])


def compare(before: Run, after: Run) -> Comparison:
    """Pair two gradings of the same answers (``osmosis regrade``) by ``(row, sample)``; the mean
    difference is over rows scored in both (per-row means first, so rows with more samples do not
    weigh more). Two runs, whose samples are separate draws, are paired by row: :func:`compare_rows`."""
    first = {row.key: row for row in before.rows}
    second = {row.key: row for row in after.rows}
    keys = sorted(set(first) | set(second))
    changes = [RowChange(key, first.get(key), second.get(key)) for key in keys]
    difference = _row_mean_difference(before, after)
    return Comparison(before, after, changes, difference)


@dataclass
class RowFigures:
    """One dataset row of a run: its samples, how they ended, how many passed, their mean score."""

    samples: int
    completed: int
    passed: int
    mean: float | None
    outcomes: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "completed": self.completed, "passed": self.passed,
                "mean_score": self.mean, "outcomes": self.outcomes}  # fmt: skip


def row_figures(run: Run) -> dict[int, RowFigures]:
    """Per dataset row: the figures of its samples (``solved passed of samples``)."""
    grouped: dict[int, list[Row]] = {}
    for row in run.rows:
        grouped.setdefault(row.row, []).append(row)
    figures = {}
    for index, rows in grouped.items():
        scores = [value for row in rows if (value := row.scored_value) is not None]
        figures[index] = RowFigures(
            samples=len(rows),
            completed=sum(row.completed for row in rows),
            passed=sum(score >= run.pass_threshold for score in scores),
            mean=sum(scores) / len(scores) if scores else None,
            outcomes=dict(sorted(Counter(row.outcome for row in rows).items())),
        )
    return figures


@dataclass
class RowDelta:
    """One dataset row as two runs saw it (all of its samples in each)."""

    key: int
    before: RowFigures | None
    after: RowFigures | None

    @property
    def delta(self) -> float | None:
        return _difference(self.before.mean if self.before else None, self.after.mean if self.after else None)

    @property
    def outcome_changed(self) -> bool:
        return (self.before and self.before.outcomes) != (self.after and self.after.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.key, "before": self.before.to_dict() if self.before else None,
                "after": self.after.to_dict() if self.after else None, "difference": self.delta}  # fmt: skip


@dataclass
class RowComparison(_Changes[RowDelta]):
    """Run ``after`` against run ``before``, dataset row against dataset row."""

    # k -> (before, after): the pass@k of each run, for every k both have
    pass_at_k: dict[int, tuple[Estimate, Estimate]] = field(default_factory=dict)
    # k -> why it is not compared: a run whose rows have too few completed samples for it
    pass_at_k_missing: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON: its figures, pass@k side by side, and the rows that changed."""
        difference = self.mean_difference
        return {
            "before": self.before.source,
            "after": self.after.source,
            "mean_difference": difference.to_dict() if difference else None,
            "rows_better": self.improved,
            "rows_worse": self.worse,
            "rows_tied": self.record.ties,
            "outcome_changes": self.outcome_changes,
            "pass_at_k": {
                **{
                    str(k): {"before": a.to_dict(), "after": b.to_dict(), "difference": b.value - a.value}
                    for k, (a, b) in self.pass_at_k.items()
                },
                **{str(k): None for k in self.pass_at_k_missing},
            },
            "pass_at_k_missing": {str(k): why for k, why in self.pass_at_k_missing.items()},
            "changed_rows": [c.to_dict() for c in self.changes if c.outcome_changed or c.delta],
        }


def _pass_at_k(run: Run) -> tuple[dict[int, Estimate], dict[int, int]]:
    """The run's pass@k and the ``k`` it has too few completed samples for (see :class:`Summary`)."""
    tally = ScoreTally(run.pass_threshold)
    for row in run.rows:
        if (value := row.scored_value) is not None:
            tally.add(row.row, value)
    return tally.pass_at_k(run.samples_per_row), tally.pass_at_k_gaps(run.samples_per_row)


def compare_rows(before: Run, after: Run) -> RowComparison:
    """Pair two runs by dataset row — a row's samples are draws, so sample i of one run has no
    counterpart in the other — comparing each row's mean score, passes and outcomes; the mean
    difference is over rows scored in both (per-row means, so rows with more samples do not weigh more)."""
    first, second = row_figures(before), row_figures(after)
    keys = sorted(set(first) | set(second))
    changes = [RowDelta(key, first.get(key), second.get(key)) for key in keys]
    difference = _row_mean_difference(before, after)
    (ahead, ahead_gaps), (behind, behind_gaps) = _pass_at_k(before), _pass_at_k(after)
    passes = {k: (ahead[k], behind[k]) for k in sorted(set(ahead) & set(behind))}
    sides = (("A", ahead_gaps), ("B", behind_gaps))
    # every k up to the samples per row of both runs, estimated or not
    both = (ahead.keys() | ahead_gaps.keys()) & (behind.keys() | behind_gaps.keys())
    missing = {
        k: "; ".join(f"{side}: {pass_at_k_gap_text(k, gaps[k])}" for side, gaps in sides if k in gaps)
        for k in sorted(both - passes.keys())
    }
    return RowComparison(before, after, changes, difference, passes, missing)
