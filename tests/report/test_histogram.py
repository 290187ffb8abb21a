"""The score histogram: its bins and the SVG they are drawn as."""

from __future__ import annotations

import re

from osmosis_ai.report.histogram import bins, histogram_svg


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
