"""The short summary every run ends with, on the terminal or as one JSON object, and ``--report FILE``.

:func:`print_summary` draws the figures of :func:`osmosis_ai.report.figures.summarize` — outcomes,
the mean score with its interval, latency percentiles, tokens and estimated cost — as one small
table, or with ``as_json`` prints them as a single JSON object on one line for scripts.
:func:`write_report` turns results (files, or documents a command still holds in memory) into the
HTML report; a command with ``--report FILE`` calls it once its results are written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import console
from osmosis_ai.report.figures import Summary
from osmosis_ai.report.model import Run


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


def summary_rows(run: Run, summary: Summary) -> list[tuple[str, str]]:
    """The summary as (figure, value) rows."""
    outcomes = ", ".join(f"{name} {n}" for name, n in summary.outcomes.items() if n) or "none"
    mean = summary.mean_score
    score = (
        f"{mean.value:.3f} [{mean.low:.3f}, {mean.high:.3f}] over {summary.scored} scored"
        if mean
        else "no scored rows"
    )
    latency = " / ".join(_ms(summary.latency_ms.get(p)) for p in ("p50", "p90", "p99"))
    rows = [("rows", f"{summary.rows}: {outcomes}"), (f"mean {run.score_name}", score)]
    rows += [
        (f"pass@{k}", f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]") for k, e in summary.pass_at_k.items()
    ]
    rows.append(("latency p50 / p90 / p99", latency))
    if summary.total_tokens is not None:
        rows.append(
            ("tokens", f"{summary.total_tokens:,} ({summary.prompt_tokens or 0:,} prompt, "
             f"{summary.completion_tokens or 0:,} completion)")
        )  # fmt: skip
    if summary.cost_usd is not None:
        rows.append(("estimated cost", f"${summary.cost_usd:.4f}"))
    if summary.violations or summary.drift_events:
        rows.append(("violations / drift", f"{summary.violations} / {summary.drift_events}"))
    return rows


def summary_object(run: Run, summary: Summary) -> dict[str, Any]:
    """The summary as one JSON-ready object."""
    return {"source": run.source, "kind": run.kind, "score_name": run.score_name, **summary.to_dict()}


def print_summary(run: Run, summary: Summary, *, as_json: bool = False) -> None:
    """The summary table on stdout, or (``as_json``) its object as one line of JSON."""
    if as_json:
        print(json.dumps(summary_object(run, summary), ensure_ascii=False), flush=True)
        return
    console.table(summary_rows(run, summary), title=f"Summary ({run.kind}: {run.source})")


def write_report(
    path: str | Path,
    results: Sequence[Run],
    *,
    title: str | None = None,
    summaries: Sequence[Summary] | None = None,
) -> Path:
    """Render ``results`` into the HTML file ``path`` (written whole or not at all)."""
    from osmosis_ai.report.render import render_report

    target = Path(path)
    if target.is_dir():
        raise CLIError(f"cannot write the report to {target}: it is a directory; give a file name")
    page = render_report(results, title=title or "Osmosis report", summaries=summaries)
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(page, encoding="utf-8")
        temporary.replace(target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise CLIError(f"cannot write the report to {target}: {exc.strerror or exc}") from exc
    return target


def report_after_run(path: str | None, document: Any, source: str) -> None:
    """For ``--report FILE``: the report of a results ``document`` a command has just produced (the
    object it wrote with ``-o``, or the list of rollout records); nothing when ``path`` is ``None``."""
    if path is None:
        return
    from osmosis_ai.report.readers import read_document

    write_report(path, [read_document(document, source)])
    print(f"Wrote report to {path}", flush=True)
