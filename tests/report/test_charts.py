"""The charts: the score histogram's bins and SVG, and the pass@k curve."""

from __future__ import annotations

import re

from osmosis_ai.report.charts import bins, histogram_svg, pass_at_k_svg
from osmosis_ai.statistics import Estimate


def test_few_distinct_values_get_one_bar_each() -> None:
    assert bins([1.0, 0.0, 1.0, 0.5]) == [(0.0, 0.0, 1), (0.5, 0.5, 1), (1.0, 1.0, 2)]


def test_many_values_get_equal_width_bins_with_the_maximum_in_the_last() -> None:
    values = [i / 100 for i in range(101)]
    table = bins(values, count=10)
    assert len(table) == 10 and sum(n for _, _, n in table) == 101
    assert table[0][:2] == (0.0, 0.1) and table[-1][2] == 11


def test_the_svg_has_one_bar_per_bin_with_its_count() -> None:
    svg = histogram_svg([0.0, 1.0, 1.0], "reward")
    assert re.findall(r'data-count="(\d+)"', svg) == ["1", "2"]
    assert svg.startswith("<svg") and "<script" not in svg
    assert histogram_svg([], "reward") == '<p class="muted">No scored rows.</p>'


def test_the_pass_at_k_curve_has_a_point_and_an_interval_per_k() -> None:
    table = {1: Estimate(0.5, 0.25, 0.75), 2: Estimate(0.75, 0.5, 1.0), 3: Estimate(0.875, 0.75, 1.0)}
    svg = pass_at_k_svg(table, "pass@k")
    assert re.findall(r'data-k="(\d+)" data-value="([\d.]+)"', svg) == [
        ("1", "0.5"),
        ("2", "0.75"),
        ("3", "0.875"),
    ]
    assert svg.count('class="interval"') == 3 and "pass@2: 0.750 [0.500, 1.000]" in svg
    assert pass_at_k_svg({1: Estimate(1.0, 1.0, 1.0)}, "pass@k") == ""  # one k is no curve
