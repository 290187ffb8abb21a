"""The regrade comparison and variance figures against hand-computed values."""

from __future__ import annotations

import pytest

from osmosis_ai.report.regrade import Pair, compare, variance


def _pairs() -> list[Pair]:
    # rows 0, 1, 3 x 2 samples scored before (1, 0.5, 0.25) and now (1, 0, 1); row 2 never scored
    before = {0: 1.0, 1: 0.5, 3: 0.25}
    now = {0: 1.0, 1: 0.0, 3: 1.0}
    pairs = [Pair(row, sample, before[row], now[row]) for row in (0, 1, 3) for sample in (0, 1)]
    return [*pairs, Pair(2, 0, None, None), Pair(2, 1, None, 0.5)]


def test_compare_against_hand_computed_values() -> None:
    result = compare(_pairs(), pass_threshold=1.0, largest=3)
    assert (result["answers"], result["compared"], result["scored_now_only"]) == (8, 6, 1)
    changed = result["changed"]
    assert changed["count"] == 4 and changed["share"] == pytest.approx(4 / 6)
    assert [(c["row_index"], c["sample_index"], c["change"]) for c in changed["largest"]] == [
        (3, 0, 0.75), (3, 1, 0.75), (1, 0, -0.5)
    ]  # fmt: skip
    mean = result["mean"]
    assert mean["old"]["value"] == pytest.approx(1.75 / 3)
    assert mean["new"]["value"] == pytest.approx(2 / 3)
    difference = mean["difference"]
    assert difference["value"] == pytest.approx(0.25 / 3)
    assert difference["low"] <= difference["value"] <= difference["high"]
    assert difference["low"] >= -0.5 and difference["high"] <= 0.75  # within the per-row differences
    assert result["pass_at_k"]["old"]["1"]["value"] == pytest.approx(1 / 3)
    assert result["pass_at_k"]["new"]["2"]["value"] == pytest.approx(2 / 3)
    agreement = result["agreement"]
    assert agreement["pass_fail"]["share"] == pytest.approx(4 / 6)
    assert agreement["pass_fail"]["kappa"] == pytest.approx(0.4)
    # ranks before (5.5, 5.5, 3.5, 3.5, 1.5, 1.5), now (4.5, 4.5, 1.5, 1.5, 4.5, 4.5): uncorrelated
    assert agreement["spearman"] == pytest.approx(0.0)
    assert compare(_pairs(), seed=0) == compare(_pairs(), seed=0)  # seeded: the same figures every time


def test_pass_fail_scores_have_no_spearman_and_nothing_compared_has_no_figures() -> None:
    binary = [Pair(0, 0, 1.0, 1.0), Pair(1, 0, 0.0, 1.0)]
    assert compare(binary)["agreement"]["spearman"] is None
    empty = compare([Pair(0, 0, None, 1.0)])
    assert empty["compared"] == 0 and empty["mean"] is None and empty["changed"]["share"] is None


def test_variance_against_hand_computed_values() -> None:
    pairs = [
        Pair(0, 0, 1.0, 1.0, (1.0, 1.0, 1.0)),  # std 0
        Pair(1, 0, 1.0, 0.0, (0.0, 1.0, 1.0)),  # std sqrt(1/3); pass/fail flips
        Pair(2, 0, 0.0, 0.5, (0.5, 0.5)),  # fewer repeats are fine
    ]
    result = variance(pairs, pass_threshold=1.0)
    assert result is not None
    assert result["answers"] == 3 and result["repeats"] == 3
    assert result["mean_std"]["value"] == pytest.approx((1 / 3) ** 0.5 / 3)
    assert result["max_std"] == pytest.approx((1 / 3) ** 0.5)
    assert result["flips"]["count"] == 1 and result["flips"]["share"]["value"] == pytest.approx(1 / 3)
    assert variance([Pair(0, 0, 1.0, 1.0)]) is None
