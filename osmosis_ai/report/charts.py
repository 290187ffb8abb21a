"""The report's charts as inline SVG (no script needed to see them): the score histogram and the
pass@k curve with its intervals."""

from __future__ import annotations

from html import escape

from osmosis_ai.statistics import Estimate

# Drawn at its own size (CSS width = WIDTH), so a 12-unit label is 12 px on the page, never scaled down.
WIDTH, HEIGHT, PAD = 480, 196, 32
MAX_BAR = 64  # a few bars stay bars, not walls


def bins(values: list[float], count: int = 10) -> list[tuple[float, float, int]]:
    """``(low, high, n)`` per bin. A handful of distinct values get one bar each; otherwise ``count``
    equal-width bins over ``[min, max]``, the last one closed."""
    if not values:
        return []
    distinct = sorted(set(values))
    if len(distinct) <= count:
        return [(v, v, values.count(v)) for v in distinct]
    low, high = distinct[0], distinct[-1]
    width = (high - low) / count
    tally = [0] * count
    for value in values:
        tally[min(count - 1, int((value - low) / width))] += 1
    return [(low + i * width, low + (i + 1) * width, n) for i, n in enumerate(tally)]


def _label(low: float, high: float) -> str:
    return f"{low:g}" if low == high else f"{low:.3g}–{high:.3g}"


def _axis_title(text: str) -> str:
    return f'<text x="{WIDTH / 2:.0f}" y="{HEIGHT - 2}" class="axis-title">{escape(text)}</text>'


def histogram_svg(values: list[float], title: str) -> str:
    """An SVG of the distribution of ``values``; each bar says its range and count in a tooltip."""
    table = bins(values)
    if not table:
        return '<p class="muted">No scored rows.</p>'
    tallest = max(n for _, _, n in table)
    slot = min((WIDTH - 2 * PAD) / len(table), MAX_BAR)
    left = (WIDTH - slot * len(table)) / 2
    bars = []
    for i, (low, high, n) in enumerate(table):
        height = (HEIGHT - 2 * PAD) * n / tallest
        x, y = left + i * slot, HEIGHT - PAD - height
        label = escape(_label(low, high))
        bars.append(
            f'<g class="bar" data-low="{low:g}" data-high="{high:g}" data-count="{n}">'
            f"<title>{label}: {n}</title>"
            f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(slot - 2, 1):.1f}" height="{height:.1f}"/>'
            f'<text x="{x + slot / 2:.1f}" y="{y - 3:.1f}" class="count">{n}</text>'
            f'<text x="{x + slot / 2:.1f}" y="{HEIGHT - PAD + 14}" class="axis">{label}</text></g>'
        )
    return (
        f'<svg class="histogram" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" class="baseline"/>'
        + "".join(bars)
        + _axis_title(f"{title} (bar height: samples)")
        + "</svg>"
    )


def pass_at_k_svg(table: dict[int, Estimate], title: str) -> str:
    """pass@k against k on a 0-1 scale: one point per k with its interval as a vertical bar."""
    if len(table) < 2:
        return ""
    ks = sorted(table)
    step = (WIDTH - 2 * PAD) / (len(ks) - 1)

    def y(value: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value

    points, marks = [], []
    for i, k in enumerate(ks):
        estimate, x = table[k], PAD + i * step
        points.append(f"{x:.1f},{y(estimate.value):.1f}")
        marks.append(
            f'<g class="point" data-k="{k}" data-value="{estimate.value:.6g}"><title>pass@{k}: '
            f"{estimate.value:.3f} [{estimate.low:.3f}, {estimate.high:.3f}]</title>"
            f'<line x1="{x:.1f}" y1="{y(estimate.low):.1f}" x2="{x:.1f}" y2="{y(estimate.high):.1f}" class="interval"/>'
            f'<circle cx="{x:.1f}" cy="{y(estimate.value):.1f}" r="3"/>'
            f'<text x="{x:.1f}" y="{HEIGHT - PAD + 14}" class="axis">{k}</text></g>'
        )
    axis = "".join(
        f'<text x="{PAD - 4}" y="{y(v) + 3:.1f}" class="axis" text-anchor="end">{v:g}</text>'
        for v in (0, 0.5, 1)
    )
    return (
        f'<svg class="curve" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" class="baseline"/>{axis}'
        f'<polyline points="{" ".join(points)}" class="line"/>'
        + "".join(marks)
        + _axis_title("k (samples drawn per row)")
        + "</svg>"
    )
