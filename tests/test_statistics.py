"""pass@k against hand computation; the Wilson interval's coverage computed exactly, the bootstrap
intervals' coverage checked by simulation (``montecarlo``: seeded, with a stated error rate)."""

from __future__ import annotations

import math
import random

import pytest

from osmosis_ai.statistics import (
    bootstrap_interval,
    bootstrap_means,
    cohen_kappa,
    paired_difference,
    pass_at_k,
    pass_at_k_table,
    ranks,
    spearman_rho,
    wilson_interval,
)


def test_pass_at_k_by_hand() -> None:
    # 5 samples, 2 pass: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@4 = 1 (only 3 fail).
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)
    assert pass_at_k(5, 2, 4) == 1.0 and pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    for n, c, k in [(10, 3, 4), (50, 7, 10), (200, 1, 100)]:
        assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_pass_at_k_table_covers_every_k_up_to_n() -> None:
    rows = [[True, False, False, False], [False, False, False, False], [True, True, False, True]]
    table = pass_at_k_table(rows, resamples=200)
    assert sorted(table) == [1, 2, 3, 4]
    assert table[1].value == pytest.approx((1 / 4 + 0 + 3 / 4) / 3)
    assert table[2].value == pytest.approx(((1 - 3 / 6) + 0 + 1) / 3)
    assert table[4].value == pytest.approx(2 / 3)
    assert all(e.low <= e.value <= e.high for e in table.values())


def test_wilson_interval_known_values_and_edges() -> None:
    estimate = wilson_interval(8, 10)
    assert (estimate.low, estimate.high) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert wilson_interval(0, 5).low == 0.0 and wilson_interval(5, 5).high == 1.0


@pytest.mark.parametrize(("p", "trials"), [(0.3, 50), (0.8, 100), (0.5, 20)])
def test_wilson_coverage_computed_exactly(p: float, trials: int) -> None:
    # The chance that the interval of each possible count covers p, summed over the binomial law.
    coverage = sum(
        math.comb(trials, k) * p**k * (1 - p) ** (trials - k)
        for k in range(trials + 1)
        if wilson_interval(k, trials).low <= p <= wilson_interval(k, trials).high
    )
    assert abs(coverage - 0.95) <= 0.02, coverage


# The bootstrap checks below draw RUNS data sets and count how often the 95% percentile interval (from
# RESAMPLES resamples) covers the true value. Over 40 rows such an interval really covers 93.1-94.4% of
# the time (3,000-run estimates for each check), so each check wants a coverage in [0.90, 0.98]: at
# 1,000 runs that window is at least 3.8 standard errors from every measured coverage (a correct
# interval fails on fewer than 1 seed in 10,000), while an interval that covers 87.5% or less fails
# with a probability above 99% (a 90% interval here covers 89.8%: it is the 95% level that is checked
# loosely, not the presence of an interval). The seeds keep each run reproducible.
RUNS = 1000
RESAMPLES = 200


def assert_coverage(covered: int, runs: int = RUNS) -> None:
    assert 0.90 <= covered / runs <= 0.98, covered / runs


@pytest.mark.montecarlo
def test_bootstrap_coverage_by_simulation() -> None:
    """A mean score over 40 rows (scores uniform on [0, 1], true mean 0.5)."""
    generator = random.Random(99)
    covered = 0
    for run in range(RUNS):
        scores = [generator.random() for _ in range(40)]
        estimate = bootstrap_interval(scores, resamples=RESAMPLES, seed=run)
        covered += estimate.low <= 0.5 <= estimate.high
    assert_coverage(covered)


def test_paired_difference_is_over_the_same_rows() -> None:
    first = [1.0, 1.0, 0.0, 1.0]
    second = [0.0, 1.0, 0.0, 0.0]
    estimate = paired_difference(first, second, resamples=500)
    assert estimate.value == pytest.approx(0.5) and estimate.low <= 0.5 <= estimate.high
    with pytest.raises(ValueError, match="differ in number"):
        paired_difference([1.0], [1.0, 0.0])


@pytest.mark.montecarlo
def test_pass_at_k_interval_coverage_by_simulation() -> None:
    """40 rows drawn from a population whose per-sample pass chance is uniform on [0, 1], n = 4 samples
    each: pass@2 over that population is E[1 - (1 - p)^2] = 2/3; pass@1 is 1/2."""
    generator = random.Random(2024)
    covered = {1: 0, 2: 0}
    for run in range(RUNS):
        rows = []
        for _ in range(40):
            p = generator.random()
            rows.append([generator.random() < p for _ in range(4)])
        table = pass_at_k_table(rows, resamples=RESAMPLES, seed=run)
        covered[1] += table[1].low <= 0.5 <= table[1].high
        covered[2] += table[2].low <= 2 / 3 <= table[2].high
    for hits in covered.values():
        assert_coverage(hits)


@pytest.mark.montecarlo
def test_paired_difference_coverage_by_simulation() -> None:
    """Two models on the same 40 rows: a row's difficulty moves both scores, the true gap is 0.1."""
    generator = random.Random(7)
    covered = 0
    for run in range(RUNS):
        difficulty = [generator.random() for _ in range(40)]
        first = [d * 0.8 + 0.1 + generator.gauss(0, 0.1) for d in difficulty]
        second = [d * 0.8 + generator.gauss(0, 0.1) for d in difficulty]
        estimate = paired_difference(first, second, resamples=RESAMPLES, seed=run)
        covered += estimate.low <= 0.1 <= estimate.high
    assert_coverage(covered)


def test_bootstrap_means_shares_its_draws_across_columns() -> None:
    first, second = [0.1, 0.9, 0.4, 0.7, 0.3], [1.0, 0.0, 1.0, 1.0, 0.0]
    together = bootstrap_means([first, second], resamples=300, seed=5)
    assert together == [bootstrap_interval(first, resamples=300, seed=5),
                        bootstrap_interval(second, resamples=300, seed=5)]  # fmt: skip
    with pytest.raises(ValueError, match="one value per row"):
        bootstrap_means([first, second[:2]])


def test_cohen_kappa_against_hand_computed_values() -> None:
    # p_o = 4/6; pass rates 1/3 and 2/3, so chance agreement 4/9: kappa = (2/9) / (5/9)
    first = [True, True, False, False, False, False]
    second = [True, True, False, False, True, True]
    assert cohen_kappa(first, second) == pytest.approx(0.4)
    assert cohen_kappa(first, first) == pytest.approx(1.0)
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    assert cohen_kappa([True, True], [True, True]) is None  # chance agrees everywhere: undefined
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


def test_ranks_share_ties_and_spearman_rho() -> None:
    assert ranks([0.25, 1.0, 0.5, 0.25]) == [1.5, 4.0, 3.0, 1.5]
    assert spearman_rho([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman_rho([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks [1, 2, 3] and [1, 3, 2]: deviations (-1, 0, 1) and (-1, 1, 0), r = 1 / 2
    assert spearman_rho([1, 2, 3], [5, 9, 7]) == pytest.approx(0.5)
    assert spearman_rho([1, 2, 3], [7, 7, 7]) is None
    assert spearman_rho([1], [2]) is None
