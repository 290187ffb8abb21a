"""Figures an evaluation reports, each with an interval that says how much to trust it.

* :func:`pass_at_k` — the unbiased estimator of pass@k from ``n`` samples of which ``c`` passed:
  ``1 - C(n-c, k) / C(n, k)``, the chance that ``k`` samples drawn without replacement from the
  ``n`` contain a pass. Averaged over rows by :func:`pass_at_k_by_row`, for every ``k <= n``.
* :func:`wilson_interval` — the Wilson score interval of a single pass rate: unlike the normal
  approximation it stays inside ``[0, 1]`` and keeps its coverage near 0 and 1 and for few trials.
* :func:`bootstrap_interval` — a percentile bootstrap over rows, for figures (a mean score,
  pass@k) whose rows are the independent units; samples of one row are resampled together.
  :func:`bootstrap_means` does it for several per-row columns with one set of draws.
* :func:`paired_difference` — two models on the same rows: the mean of the per-row differences
  and its bootstrap interval, never a difference of two separately computed summaries.
* :class:`WinLossTie` — the same paired rows counted: where the first is higher, lower, equal.
* :func:`pass_at_k_gaps` — the ``k`` that :func:`pass_at_k_table` cannot give (a row has fewer than
  ``k`` samples), each with how many rows fall short, so a report can say why they are missing.
* :func:`cohen_kappa` and :func:`spearman_rho` — how far two graders of the same rows agree: on
  pass/fail beyond chance, and on the order of continuous scores.

Pure Python; the bootstrap takes a seed so reports are reproducible.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean


@dataclass(frozen=True)
class Estimate:
    """A figure with its confidence interval ``[low, high]`` at ``confidence``."""

    value: float
    low: float
    high: float
    confidence: float = 0.95

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high, "confidence": self.confidence}


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` passes (``0 <= c <= n``, ``1 <= k <= n``)."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k)/C(n, k) as a product, which stays exact enough for large n.
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_at_k_by_row(rows: Sequence[Sequence[bool]], k: int) -> list[float]:
    """pass@k of each row (each row's samples, passed or not)."""
    return [pass_at_k(len(samples), sum(bool(s) for s in samples), k) for samples in rows]


def pass_at_k_table(
    rows: Sequence[Sequence[bool]], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> dict[int, Estimate]:
    """Mean pass@k over rows for every ``k`` up to the fewest samples any row has, with bootstrap intervals.

    Every ``k`` is resampled with the same draws of rows (:func:`bootstrap_means`).
    """
    if not rows:
        return {}
    largest = min(len(samples) for samples in rows)
    columns = [pass_at_k_by_row(rows, k) for k in range(1, largest + 1)]
    estimates = bootstrap_means(columns, confidence=confidence, resamples=resamples, seed=seed)
    return dict(enumerate(estimates, start=1))


def pass_at_k_gaps(samples: Sequence[int], largest: int) -> dict[int, int]:
    """For every ``k <= largest`` beyond the fewest of ``samples`` (each row's number of samples):
    how many rows have fewer than ``k``, the reason pass@k has no unbiased estimate there."""
    if not samples:
        return {}
    return {k: sum(n < k for n in samples) for k in range(min(samples) + 1, largest + 1)}


def pass_at_k_gap_text(k: int, short: int) -> str:
    """Why pass@``k`` is not given, in words: ``short`` rows have fewer than ``k`` completed samples."""
    rows = "1 row has" if short == 1 else f"{short} rows have"
    return f"needs {k} completed samples of a row; {rows} fewer"


def wilson_interval(successes: int, trials: int, *, confidence: float = 0.95) -> Estimate:
    """The pass rate ``successes / trials`` with its Wilson score interval."""
    if not 0 <= successes <= trials or trials < 1:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    z = _z(confidence)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # At 0 or all successes the bound is exactly 0 or 1; the formula gives it only up to rounding.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return Estimate(p, low, high, confidence)


def _percentiles(draws: list[float], confidence: float, resamples: int) -> tuple[float, float]:
    draws.sort()
    tail = (1 - confidence) / 2
    low = draws[max(0, math.floor(tail * resamples))]
    high = draws[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return low, high


def bootstrap_interval(
    values: Sequence[float],
    *,
    statistic: Callable[[Sequence[float]], float] = fmean,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """``statistic(values)`` with a percentile bootstrap interval from ``resamples`` resamples of the rows."""
    if statistic is fmean:
        return bootstrap_means([values], confidence=confidence, resamples=resamples, seed=seed)[0]
    _z(confidence)
    if not values:
        raise ValueError("no values to summarise")
    value = statistic(values)
    if len(values) == 1:
        return Estimate(value, value, value, confidence)
    generator = random.Random(seed)
    n = len(values)
    draws = [statistic([values[generator.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    low, high = _percentiles(draws, confidence, resamples)
    return Estimate(value, low, high, confidence)


def bootstrap_means(
    columns: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> list[Estimate]:
    """The mean of each column (one value per row, all columns over the same rows) with its percentile
    bootstrap interval; every column is resampled with the same draws of rows, so the cost of drawing
    is paid once (a 1,000-row, four-column summary takes well under a second)."""
    _z(confidence)
    if not columns or not columns[0]:
        raise ValueError("no values to summarise")
    n = len(columns[0])
    if any(len(column) != n for column in columns):
        raise ValueError("every column must have one value per row")
    means = [fmean(column) for column in columns]
    if n == 1:
        return [Estimate(m, m, m, confidence) for m in means]
    draw = random.Random(seed).random
    draws: list[list[float]] = [[] for _ in columns]
    for _ in range(resamples):
        picked = [int(draw() * n) for _ in range(n)]
        for column, out in zip(columns, draws, strict=True):
            out.append(math.fsum(map(column.__getitem__, picked)) / n)
    return [
        Estimate(mean, *_percentiles(out, confidence, resamples), confidence)
        for mean, out in zip(means, draws, strict=True)
    ]


def paired_difference(
    first: Sequence[float],
    second: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Mean of ``first[i] - second[i]`` over rows both were measured on, with its bootstrap interval."""
    if len(first) != len(second):
        raise ValueError(f"paired rows differ in number: {len(first)} and {len(second)}")
    differences = [a - b for a, b in zip(first, second, strict=True)]
    return bootstrap_interval(differences, confidence=confidence, resamples=resamples, seed=seed)


@dataclass(frozen=True)
class WinLossTie:
    """Paired rows counted by which side scored higher: ``wins`` where the first did."""

    wins: int = 0
    losses: int = 0
    ties: int = 0

    @classmethod
    def of(cls, differences: Iterable[float]) -> WinLossTie:
        """The counts of ``differences`` (first minus second, one per paired row)."""
        signs = [(d > 0) - (d < 0) for d in differences]
        return cls(signs.count(1), signs.count(-1), signs.count(0))

    @property
    def total(self) -> int:
        return self.wins + self.losses + self.ties

    def __add__(self, other: WinLossTie) -> WinLossTie:
        return WinLossTie(self.wins + other.wins, self.losses + other.losses, self.ties + other.ties)

    def describe(self) -> str:
        return f"W/L/T {self.wins}/{self.losses}/{self.ties}"

    def to_dict(self) -> dict[str, int]:
        return {"wins": self.wins, "losses": self.losses, "ties": self.ties}


class ScoreTally:
    """Per row, the sum, count and passes of its scores: all the mean and pass@k need, so a run
    that keeps no rows (``rollout run``) can still be summarised, in memory that grows with the rows
    of the dataset only."""

    def __init__(self, pass_threshold: float = 1.0) -> None:
        self.pass_threshold = pass_threshold
        self.by_row: dict[int, list[float]] = {}  # row -> [sum, count, passes]

    def add(self, row: int, score: float) -> None:
        entry = self.by_row.setdefault(row, [0.0, 0, 0])
        entry[0] += score
        entry[1] += 1
        entry[2] += score >= self.pass_threshold

    @property
    def scored(self) -> int:
        return sum(int(entry[1]) for entry in self.by_row.values())

    @property
    def total(self) -> float:
        return sum(entry[0] for entry in self.by_row.values())

    def mean(self) -> Estimate | None:
        """The mean of per-row means, with its bootstrap interval over rows."""
        means = [total / count for total, count, _ in self.by_row.values()]
        return bootstrap_interval(means) if means else None

    def pass_at_k(self, samples_per_row: int) -> dict[int, Estimate]:
        if not self.by_row or samples_per_row <= 1:
            return {}
        outcomes = [[True] * int(p) + [False] * int(n - p) for _, n, p in self.by_row.values()]
        return pass_at_k_table(outcomes)

    def pass_at_k_gaps(self, samples_per_row: int) -> dict[int, int]:
        """The ``k`` up to ``samples_per_row`` that :meth:`pass_at_k` leaves out (see :func:`pass_at_k_gaps`)."""
        if samples_per_row <= 1:
            return {}
        return pass_at_k_gaps([int(n) for _, n, _ in self.by_row.values()], samples_per_row)


def cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> float | None:
    """Cohen's kappa of two pass/fail gradings of the same rows: their agreement beyond what their
    pass rates alone would give by chance, ``(p_o - p_e) / (1 - p_e)``; ``None`` when chance already
    agrees on every row (both graders give one verdict to all), where kappa is undefined."""
    if len(first) != len(second):
        raise ValueError(f"paired rows differ in number: {len(first)} and {len(second)}")
    if not first:
        raise ValueError("no rows to compare")
    n = len(first)
    observed = sum(bool(a) == bool(b) for a, b in zip(first, second, strict=True)) / n
    p_first, p_second = sum(map(bool, first)) / n, sum(map(bool, second)) / n
    chance = p_first * p_second + (1 - p_first) * (1 - p_second)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1 - chance)


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks of ``values``, tied values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in order[start : end + 1]:
            result[position] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman_rho(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman's rank correlation of two gradings of the same rows (Pearson's r of their ranks, so
    ties are handled); ``None`` when either grading gives every row the same score."""
    if len(first) != len(second):
        raise ValueError(f"paired rows differ in number: {len(first)} and {len(second)}")
    x, y = ranks(first), ranks(second)
    if len(x) < 2:
        return None
    mx, my = fmean(x), fmean(y)
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)
