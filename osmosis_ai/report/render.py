"""The self-contained HTML page: summaries, histograms, tables and the trajectory viewer.

Everything the page needs is in the one file: ``assets/report.css`` and ``assets/report.js`` are
inlined into ``assets/report.html``, a Content-Security-Policy forbids any load from elsewhere and
lets only that one script run (by its SHA-256: a script injected through a field would be inert), and
the trajectories of each run are one gzip-compressed JSON array, base64-encoded, that the browser
decompresses (``DecompressionStream``) the first time a row is opened. Summaries, histograms and
tables are drawn here, so they show even where scripts are off; the script sorts, filters, searches
and draws the chat view.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape
from importlib.resources import files
from typing import Any

from osmosis_ai.consts import PACKAGE_VERSION
from osmosis_ai.report.charts import histogram_svg, pass_at_k_svg
from osmosis_ai.report.figures import (
    Comparison,
    RowComparison,
    RowFigures,
    Summary,
    compare,
    compare_rows,
    row_figures,
    summarize,
)
from osmosis_ai.report.model import Row, Run
from osmosis_ai.statistics import pass_at_k, pass_at_k_gap_text

PREVIEW_CHARS = 120


def _asset(name: str) -> str:
    return files("osmosis_ai.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _milliseconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def _tokens(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _cost(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def _figure(name: str, label: str, value: str, note: str = "") -> str:
    note_html = f'<span class="note">{escape(note)}</span>' if note else ""
    return (
        f'<div class="figure"><span class="label">{escape(label)}</span>'
        f'<span class="value" data-figure="{name}">{escape(value)}</span>{note_html}</div>'
    )


def _interval(estimate: Any) -> str:
    return f"[{estimate.low:.3f}, {estimate.high:.3f}]"


def _count_figures(summary: Summary) -> list[str]:
    """Rows, and with ``--n`` > 1 the samples beside them: every other count is of samples."""
    share = f"{summary.completed / summary.rows:.1%}" if summary.rows else ""
    if summary.samples_per_row <= 1:
        return [
            _figure("rows", "rows", str(summary.rows)),
            _figure("completed", "completed", str(summary.completed), share),
        ]
    rows = [] if summary.dataset_rows is None else [_figure("rows", "rows", str(summary.dataset_rows))]
    return [
        *rows,
        _figure("samples", "samples", str(summary.rows), f"up to {summary.samples_per_row} per row"),
        _figure("completed", "completed samples", str(summary.completed), share),
    ]


def _summary_html(run: Run, summary: Summary) -> str:
    mean = summary.mean_score
    parts = [
        *_count_figures(summary),
        _figure("mean-score", f"mean {run.score_name}", _number(mean.value if mean else None),
                f"95% CI {_interval(mean)} over {summary.scored} scored" if mean else "no scored rows"),
        _figure("latency-p50", "latency p50", _milliseconds(summary.latency_ms.get("p50"))),
        _figure("latency-p90", "p90", _milliseconds(summary.latency_ms.get("p90"))),
        _figure("latency-p99", "p99", _milliseconds(summary.latency_ms.get("p99"))),
        _figure("prompt-tokens", "prompt tokens", _tokens(summary.prompt_tokens)),
        _figure("completion-tokens", "completion tokens", _tokens(summary.completion_tokens)),
        _figure("cost", "estimated cost", _cost(summary.cost_usd), run.model or "model not recorded"),
        _figure("violations", "append-only violations", str(summary.violations)),
        _figure("drift", "drift events", str(summary.drift_events)),
    ]  # fmt: skip
    outcomes = "".join(
        f'<tr data-outcome="{escape(name)}"><td><span class="outcome {escape(name)}">{escape(name)}</span></td>'
        f'<td class="num" data-count="{count}">{count}</td></tr>'
        for name, count in summary.outcomes.items()
        if count
    )
    html = [f'<div class="figures">{"".join(parts)}</div>', '<div class="columns">']
    html.append(f'<table class="outcomes"><caption>Outcomes</caption><tbody>{outcomes}</tbody></table>')
    if summary.pass_at_k or summary.pass_at_k_gaps:
        rows = "".join(
            f'<tr data-k="{k}"><td>pass@{k}</td><td class="num">{e.value:.3f}</td><td>{_interval(e)}</td></tr>'
            for k, e in summary.pass_at_k.items()
        ) + "".join(
            f'<tr data-k="{k}" class="missing"><td>pass@{k}</td><td class="num">–</td>'
            f"<td>{escape(pass_at_k_gap_text(k, short))}</td></tr>"
            for k, short in summary.pass_at_k_gaps.items()
        )
        html.append(
            f'<table class="pass-at-k"><caption>pass@k ({escape(run.score_name)} ≥ {run.pass_threshold:g})'
            f"</caption><tbody>{rows}</tbody></table>"
        )
    if summary.pass_at_k:
        html.append(
            f"<figure><figcaption>pass@k</figcaption>{pass_at_k_svg(summary.pass_at_k, 'pass@k')}</figure>"
        )
    if run.baseline:
        html.append(_baseline_html(run))
    if run.paired:
        html.append(_paired_html(run))
    values = [value for row in run.rows if (value := row.scored_value) is not None]
    html.append(
        f"<figure><figcaption>{escape(run.score_name)} of completed rows</figcaption>"
        f"{histogram_svg(values, run.score_name)}</figure>"
    )
    for name, other in summary.other_scores.items():  # every eval function, not only the first
        scores = [row.scores[name] for row in run.rows if row.completed and name in row.scores]
        average = _number(other.mean.value if other.mean else None)
        html.append(
            f'<figure data-score="{escape(name)}"><figcaption>{escape(name)} of completed rows (mean {average})'
            f"</figcaption>{histogram_svg(scores, name)}"
            f"{pass_at_k_svg(other.pass_at_k, f'pass@k {name}') if other.pass_at_k else ''}{_gaps_note(other.pass_at_k_gaps)}"
            "</figure>"
        )
    html.append("</div>")
    return "".join(html)


def _gaps_note(gaps: dict[int, int]) -> str:
    return "".join(
        f'<p class="muted" data-k="{k}">pass@{k}: – ({escape(pass_at_k_gap_text(k, short))})</p>'
        for k, short in gaps.items()
    )


def _baseline_html(run: Run) -> str:
    rows = "".join(
        f'<tr data-figure="{escape(f.name)}"><td>{escape(f.name)}</td><td class="num">{f.baseline:g}</td>'
        f'<td class="num">{_number(f.candidate, 4)}</td>'
        f'<td class="num">{_number(None if f.candidate is None else f.candidate - f.baseline, 4)}</td></tr>'
        for f in run.baseline
    )
    source = f" ({escape(run.baseline_source)})" if run.baseline_source else ""
    return (
        f'<table class="baseline"><caption>Baseline{source} vs this run</caption>'
        f"<thead><tr><th>figure</th><th>baseline</th><th>candidate</th><th>delta</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _paired_html(run: Run) -> str:
    """``eval --baseline-model``: per eval function, this run minus the baseline over the rows both
    completed, and the rows won, lost and tied."""
    rows = []
    for f in run.paired:
        interval = "–" if f.interval is None else f"[{f.interval[0]:+.3f}, {f.interval[1]:+.3f}]"
        counts = ("–", "–", "–") if f.record is None else (f.record.wins, f.record.losses, f.record.ties)
        rows.append(
            f'<tr data-figure="{escape(f.name)}"><td>{escape(f.name)}</td><td class="num">{f.difference:+.3f}</td>'
            f'<td>{interval}</td><td class="num">{f.rows}</td>'
            + "".join(
                f'<td class="num" data-count="{key}">{n}</td>' for key, n in zip("wlt", counts, strict=True)
            )
            + "</tr>"
        )
    source = f" {escape(run.baseline_source)}" if run.baseline_source else ""
    return (
        f'<table class="paired"><caption>This run minus the baseline{source}, row by row</caption>'
        "<thead><tr><th>eval function</th><th>difference</th><th>95% CI</th><th>rows</th>"
        f"<th>W</th><th>L</th><th>T</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _preview(row: Row) -> str:
    for message in reversed(row.trajectory.messages):
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            text = " ".join(content.split())
            return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return ""


def _cell(text: str, sort: Any = None, css: str = "") -> str:
    sort_attr = "" if sort is None else f' data-sort="{escape(str(sort))}"'
    css_attr = f' class="{css}"' if css else ""
    return f"<td{css_attr}{sort_attr}>{escape(text)}</td>"


def _rows_table(index: int, run: Run) -> str:
    head = [
        "row",
        "sample",
        "label",
        "outcome",
        run.score_name,
        "finish",
        "latency",
        "tokens",
        "flags",
        "preview",
    ]
    body = []
    for position, row in enumerate(run.rows):
        tokens = (row.prompt_tokens or 0) + (row.completion_tokens or 0)
        flags = []
        if row.trajectory.violations:
            flags.append(f"{len(row.trajectory.violations)} violation(s)")
        if row.trajectory.drift:
            flags.append(f"{len(row.trajectory.drift)} drift")
        cells = [
            _cell(str(row.row), row.row, "num"),
            _cell(str(row.sample), row.sample, "num"),
            _cell(row.label),
            f'<td><span class="outcome {escape(row.outcome)}">{escape(row.outcome)}</span></td>',
            _cell(_number(row.score) if row.score is not None else "–", row.score if row.score is not None else "", "num"),
            _cell(row.finish_reason or ""),
            _cell(_milliseconds(row.latency_ms), row.latency_ms if row.latency_ms is not None else "", "num"),
            _cell(_tokens(tokens) if row.prompt_tokens is not None or row.completion_tokens is not None else "–",
                  tokens, "num"),
            _cell(", ".join(flags), len(flags), "flags" if flags else ""),
            _cell(row.error or _preview(row), css="preview"),
        ]  # fmt: skip
        body.append(
            f'<tr data-run="{index}" data-index="{position}" data-outcome="{escape(row.outcome)}" '
            f'data-key="{row.row}:{row.sample}" tabindex="0">{"".join(cells)}</tr>'
        )
    options = "".join(
        f'<option value="{escape(name)}">{escape(name)}</option>'
        for name in sorted({row.outcome for row in run.rows})
    )
    headers = "".join(f'<th data-column="{i}">{escape(name)}</th>' for i, name in enumerate(head))
    return (
        f'<div class="controls"><label>outcome <select class="filter" data-run="{index}">'
        f'<option value="">all</option>{options}</select></label>'
        f'<input type="search" class="search" data-run="{index}" placeholder="search rows">'
        f'<span class="shown" data-run="{index}"></span></div>'
        f'<div class="scroll"><table class="rows sortable" data-run="{index}"><thead><tr>{headers}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _pack(value: Any) -> str:
    """gzip (no timestamp, so the same input gives the same page) + base64 of compact JSON."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _row_meta(row: Row) -> dict[str, Any]:
    return {
        "label": row.label, "row": row.row, "sample": row.sample, "outcome": row.outcome,
        "score": row.score, "scores": row.scores, "finish": row.finish_reason, "error": row.error,
        "latency": row.latency_ms, "prompt": row.prompt_tokens, "completion": row.completion_tokens,
    }  # fmt: skip


def _run_section(index: int, run: Run, summary: Summary) -> str:
    model = f" · {escape(run.model)}" if run.model else ""
    notes = "".join(f'<p class="warning">{escape(note)}</p>' for note in run.notes)
    trajectories = [{**_row_meta(row), **row.trajectory.to_dict()} for row in run.rows]
    return (
        f'<section class="run" id="run-{index}" data-run="{index}">'
        f'<h2><span class="kind">{escape(run.kind)}</span> {escape(run.source)}{model}</h2>{notes}'
        f"{_summary_html(run, summary)}{_per_row_table(run)}"
        f"<h3>Rows</h3>{_rows_table(index, run)}"
        f'<div class="viewer" data-run="{index}" hidden></div>'
        f'<script type="application/octet-stream" class="trajectories" data-run="{index}">{_pack(trajectories)}</script>'
        "</section>"
    )


def _change_figures(comparison: Comparison | RowComparison, unit: str) -> list[str]:
    """The figures atop a comparison: the mean difference of per-row means with its interval, then
    the ``unit`` (rows; samples for a regrade of several samples per row) better, worse and tied in
    B (its wins, losses and ties) and those whose outcome changed."""
    difference = comparison.mean_difference
    record = comparison.record
    return [
        _figure("mean-difference", "mean difference (B − A)", _number(difference.value if difference else None),
                f"95% CI {_interval(difference)} over rows" if difference else "no row scored in both"),
        _figure("improved", f"{unit} better (W)", str(record.wins)),
        _figure("worse", f"{unit} worse (L)", str(record.losses)),
        _figure("tied", f"{unit} tied (T)", str(record.ties)),
        _figure("outcome-changes", f"{unit} with outcome changed", str(comparison.outcome_changes)),
    ]  # fmt: skip


def _comparison_section(
    number: int, comparison: Comparison, before: int, after: int, *, regrade: bool = False
) -> str:
    """Run ``after`` against run ``before``: their changed rows; for a regrade (``before`` is the
    earlier grading, which has no section of its own) every row, the changed ones first."""
    figures = _change_figures(comparison, "samples" if comparison.after.samples_per_row > 1 else "rows")
    body = []
    changes = comparison.changes
    if regrade:
        changes = sorted(changes, key=lambda c: not (c.outcome_changed or c.delta))
    for change in changes:
        a, b, delta = change.before, change.after, change.delta
        if not change.outcome_changed and not delta and not regrade:
            continue
        css = (
            "better"
            if delta and delta > 0
            else "worse"
            if delta and delta < 0
            else "changed"
            if change.outcome_changed
            else "same"
        )
        body.append(
            f'<tr class="{css}" data-key="{change.key[0]}:{change.key[1]}">'
            + _cell(str(change.key[0]), change.key[0], "num") + _cell(str(change.key[1]), change.key[1], "num")
            + _cell(a.outcome if a else "(absent)") + _cell(b.outcome if b else "(absent)")
            + _cell(_number(a.score if a else None), a.score if a and a.score is not None else "", "num")
            + _cell(_number(b.score if b else None), b.score if b and b.score is not None else "", "num")
            + _cell(_number(delta), delta if delta is not None else "", "num")
            + "</tr>"
        )  # fmt: skip
    table = (
        '<div class="scroll"><table class="changes sortable"><thead><tr><th>row</th><th>sample</th>'
        "<th>outcome A</th><th>outcome B</th><th>score A</th><th>score B</th><th>Δ</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
        if body
        else '<p class="muted">No row changed its outcome or score.</p>'
    )
    against = (
        f"the earlier grading of {escape(comparison.before.source)}"
        if regrade
        else f'<a href="#run-{before}">{escape(comparison.before.source)}</a>'
    )
    anchor = f"regrade-{after}" if regrade else f"comparison-{number}"
    return (
        f'<section class="comparison" id="{anchor}"><h2>{"Regrade" if regrade else "B vs A"}: '
        f'<a href="#run-{after}">{escape(comparison.after.source)}</a> against {against}</h2>'
        f'<div class="figures">{"".join(figures)}</div>{table}</section>'
    )


def _solved(figures: RowFigures | None) -> str:
    return "(absent)" if figures is None else f"{figures.passed} of {figures.samples}"


def _outcomes(figures: RowFigures | None) -> str:
    return "(absent)" if figures is None else ", ".join(f"{n} {name}" for name, n in figures.outcomes.items())


def _row_comparison_section(number: int, comparison: RowComparison, before: int, after: int) -> str:
    """Run ``after`` against run ``before``, dataset row against dataset row, with pass@k side by side."""
    figures = _change_figures(comparison, "rows")
    passes = "".join(
        f'<tr data-k="{k}"><td>pass@{k}</td><td class="num">{a.value:.3f}</td><td class="num">{b.value:.3f}</td>'
        f'<td class="num">{b.value - a.value:+.3f}</td></tr>'
        for k, (a, b) in comparison.pass_at_k.items()
    ) + "".join(
        f'<tr data-k="{k}" class="missing"><td>pass@{k}</td><td colspan="3">– ({escape(why)})</td></tr>'
        for k, why in comparison.pass_at_k_missing.items()
    )
    pass_table = (
        '<table class="pass-at-k-comparison"><caption>pass@k, A and B</caption><thead><tr><th>k</th>'
        f"<th>A</th><th>B</th><th>B − A</th></tr></thead><tbody>{passes}</tbody></table>"
        if passes
        else ""
    )
    body = []
    for change in comparison.changes:
        a, b, delta = change.before, change.after, change.delta
        if not change.outcome_changed and not delta:
            continue
        css = "better" if delta and delta > 0 else "worse" if delta and delta < 0 else "changed"
        body.append(
            f'<tr class="{css}" data-key="{change.key}">'
            + _cell(str(change.key), change.key, "num")
            + _cell(_solved(a), a.passed if a else "", "num") + _cell(_solved(b), b.passed if b else "", "num")
            + _cell(_number(a.mean if a else None), a.mean if a and a.mean is not None else "", "num")
            + _cell(_number(b.mean if b else None), b.mean if b and b.mean is not None else "", "num")
            + _cell(_number(delta), delta if delta is not None else "", "num")
            + _cell(_outcomes(a)) + _cell(_outcomes(b))
            + "</tr>"
        )  # fmt: skip
    table = (
        '<div class="scroll"><table class="changes sortable"><thead><tr><th>row</th><th>solved A</th>'
        "<th>solved B</th><th>mean A</th><th>mean B</th><th>Δ</th><th>outcomes A</th><th>outcomes B</th>"
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        if body
        else '<p class="muted">No row changed its outcomes or mean score.</p>'
    )
    return (
        f'<section class="comparison" id="comparison-{number}"><h2>B vs A: '
        f'<a href="#run-{after}">{escape(comparison.after.source)}</a> against '
        f'<a href="#run-{before}">{escape(comparison.before.source)}</a></h2>'
        f'<div class="figures">{"".join(figures)}</div>{pass_table}{table}</section>'
    )


def _per_row_table(run: Run) -> str:
    """With several samples per row: each row's passes ("solved k of n"), mean and pass@k."""
    n = run.samples_per_row
    if n <= 1:
        return ""
    ks = range(1, n + 1)
    body = []
    for index, figures in sorted(row_figures(run).items()):
        cells = [
            _cell(str(index), index, "num"),
            _cell(f"{figures.passed} of {figures.samples}", figures.passed, "num"),
            _cell(_number(figures.mean), figures.mean if figures.mean is not None else "", "num"),
        ]
        for k in ks:
            value = pass_at_k(figures.samples, figures.passed, k) if k <= figures.samples else None
            cells.append(_cell(_number(value), value if value is not None else "", "num"))
        cells.append(_cell(_outcomes(figures)))
        body.append(f'<tr data-row="{index}">{"".join(cells)}</tr>')
    headers = "".join(
        f"<th>{escape(h)}</th>" for h in ("row", "solved", "mean", *(f"pass@{k}" for k in ks), "outcomes")
    )
    return (
        f"<h3>Per row ({escape(run.score_name)} ≥ {run.pass_threshold:g} passes)</h3>"
        f'<div class="scroll"><table class="per-row sortable"><thead><tr>{headers}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _script_hash(script: str) -> str:
    """The CSP source that lets exactly this inline script run (and no script injected beside it)."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def render_report(
    runs: Sequence[Run], *, title: str = "Osmosis report", summaries: Sequence[Summary] | None = None
) -> str:
    """The whole page for ``runs``; with several, every later run is also compared with the first.
    ``summaries`` (one per run) are computed when not given."""
    if summaries is None:
        summaries = [summarize(run) for run in runs]
    sections = [_run_section(i, run, s) for i, (run, s) in enumerate(zip(runs, summaries, strict=True))]
    comparisons = [
        _comparison_section(i, compare(run.previous, run), i, i, regrade=True)
        for i, run in enumerate(runs)
        if run.previous is not None
    ]
    comparisons += [
        _row_comparison_section(i, compare_rows(runs[0], run), 0, i) for i, run in enumerate(runs) if i
    ]
    navigation = "".join(
        f'<a href="#run-{i}">{escape(run.kind)}: {escape(run.source)}</a>' for i, run in enumerate(runs)
    ) + "".join(
        f'<a href="#regrade-{i}">regrade</a>' for i, run in enumerate(runs) if run.previous is not None
    )
    navigation += "".join(f'<a href="#comparison-{i}">comparison {i}</a>' for i in range(1, len(runs)))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = (
        f'<header><h1>{escape(title)}</h1><p class="muted">osmosis-ai {PACKAGE_VERSION} · {generated}</p>'
        f"<nav>{navigation}</nav></header><main>{''.join(comparisons)}{''.join(sections)}</main>"
    )
    page = _asset("report.html")
    script = _asset("report.js").replace("</", "<\\/")
    for marker, value in (
        ("/*SCRIPT-HASH*/", _script_hash(script)),
        ("/*STYLE*/", _asset("report.css")),
        ("/*SCRIPT*/", script),
        ("<!--TITLE-->", escape(title)),
        ("<!--BODY-->", body),
    ):
        page = page.replace(marker, value, 1)
    return page
