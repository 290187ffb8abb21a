"""What a regrade found: the same answers scored by an earlier grader and a new one, compared.

:func:`compare` takes one :class:`Pair` per answer (row, sample) — its earlier score and its new one,
either missing when that grading did not score it — and returns the JSON-ready comparison: which
answers changed (how many, their share, the largest changes), the mean before and after with the
paired difference and its interval, pass@k before and after, and how far the two graders agree
(pass/fail: the share agreeing and Cohen's kappa; continuous scores: Spearman's rho). Only answers
both graders scored are compared. :func:`variance` summarises a grader scoring each answer several
times (``osmosis regrade -r K``): how far its scores of one answer spread, and how often its
pass/fail verdict flips.

Every interval is a seeded bootstrap over rows (the samples of one row are resampled together), so
the same inputs always give the same figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from osmosis_ai.statistics import (
    bootstrap_interval,
    bootstrap_means,
    cohen_kappa,
    pass_at_k_table,
    spearman_rho,
    wilson_interval,
)

# A score that moved by less than this did not change (scores are floats that went through JSON).
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Pair:
    """One answer's earlier and new scores; ``repeats`` are all of the new grader's scores of it."""

    row: int
    sample: int
    old: float | None
    new: float | None
    repeats: tuple[float, ...] = ()

    @property
    def change(self) -> float | None:
        return None if self.old is None or self.new is None else self.new - self.old


def _by_row(pairs: Sequence[Pair]) -> dict[int, list[Pair]]:
    rows: dict[int, list[Pair]] = {}
    for pair in pairs:
        rows.setdefault(pair.row, []).append(pair)
    return rows


def _is_binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def compare(
    pairs: Sequence[Pair], *, pass_threshold: float = 1.0, largest: int = 5, seed: int = 0
) -> dict[str, Any]:
    """The comparison of the earlier and the new scores of ``pairs`` (see the module docstring)."""
    both = [p for p in pairs if p.old is not None and p.new is not None]
    changed = sorted(
        (p for p in both if abs(p.change or 0.0) > TOLERANCE),
        key=lambda p: (-abs(p.change or 0.0), p.row, p.sample),
    )
    result: dict[str, Any] = {
        "answers": len(pairs),
        "compared": len(both),
        "scored_before_only": sum(p.old is not None and p.new is None for p in pairs),
        "scored_now_only": sum(p.old is None and p.new is not None for p in pairs),
        "pass_threshold": pass_threshold,
        "changed": {
            "count": len(changed),
            "share": len(changed) / len(both) if both else None,
            "largest": [
                {"row_index": p.row, "sample_index": p.sample, "old": p.old, "new": p.new, "change": p.change}
                for p in changed[:largest]
            ],
        },
        "mean": None,
        "pass_at_k": None,
        "agreement": None,
    }
    if not both:
        return result
    rows = _by_row(both)
    old_means = [statistics.fmean(p.old for p in group if p.old is not None) for group in rows.values()]
    new_means = [statistics.fmean(p.new for p in group if p.new is not None) for group in rows.values()]
    differences = [new - old for new, old in zip(new_means, old_means, strict=True)]
    old, new, difference = bootstrap_means([old_means, new_means, differences], seed=seed)
    result["mean"] = {"old": old.to_dict(), "new": new.to_dict(), "difference": difference.to_dict()}
    passes_old = [[(p.old or 0.0) >= pass_threshold for p in group] for group in rows.values()]
    passes_new = [[(p.new or 0.0) >= pass_threshold for p in group] for group in rows.values()]
    result["pass_at_k"] = {
        "old": {str(k): e.to_dict() for k, e in pass_at_k_table(passes_old, seed=seed).items()},
        "new": {str(k): e.to_dict() for k, e in pass_at_k_table(passes_new, seed=seed).items()},
    }
    flat_old = [v for group in passes_old for v in group]
    flat_new = [v for group in passes_new for v in group]
    scores_old = [p.old for p in both if p.old is not None]
    scores_new = [p.new for p in both if p.new is not None]
    binary = _is_binary(scores_old) and _is_binary(scores_new)
    result["agreement"] = {
        "pass_fail": {
            "share": sum(a == b for a, b in zip(flat_old, flat_new, strict=True)) / len(both),
            "kappa": cohen_kappa(flat_old, flat_new),
        },
        "spearman": None if binary else spearman_rho(scores_old, scores_new),
    }
    return result


def variance(pairs: Sequence[Pair], *, pass_threshold: float = 1.0, seed: int = 0) -> dict[str, Any] | None:
    """How the new grader's repeated scores of each answer spread: the mean within-answer standard
    deviation with its interval (over rows), the largest, and the share of answers whose pass/fail
    verdict flips across the repeats (with its Wilson interval). ``None`` without repeats."""
    repeated = [p for p in pairs if len(p.repeats) >= 2]
    if not repeated:
        return None
    deviations = {(p.row, p.sample): statistics.stdev(p.repeats) for p in repeated}
    per_row = [
        statistics.fmean(deviations[(p.row, p.sample)] for p in group) for group in _by_row(repeated).values()
    ]
    flips = sum(len({score >= pass_threshold for score in p.repeats}) > 1 for p in repeated)
    return {
        "answers": len(repeated),
        "repeats": max(len(p.repeats) for p in repeated),
        "mean_std": bootstrap_interval(per_row, seed=seed).to_dict(),
        "max_std": max(deviations.values()),
        "flips": {"count": flips, "share": wilson_interval(flips, len(repeated)).to_dict()},
    }
