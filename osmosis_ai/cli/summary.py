"""The short summary every run ends with, on the terminal or as one JSON object, and ``--report FILE``.

:func:`print_summary` draws the figures of :func:`osmosis_ai.report.figures.summarize` — outcomes,
the mean score with its interval, latency percentiles, tokens and estimated cost — as one small
table, or with ``as_json`` prints them as a single JSON object on one line for scripts.
:func:`write_report` turns results into the HTML report. A command that produces results adds
``--report FILE`` and ``--json`` with :func:`add_summary_arguments`, calls :func:`show_summary` just
before its outcome line (so that line stays the last) and :func:`finish_run` once its results exist
(a file, or the document it still holds in memory); that also sends the run to the experiment loggers
of ``--log-to`` (:func:`osmosis_ai.cli.arguments.add_log_to_argument`, :func:`log_experiment`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osmosis_ai.cli.arguments import absolute_path, add_log_to_argument
from osmosis_ai.cli.output import console, print_json, say
from osmosis_ai.cli.output_file import declare_files

TYPE_CHECKING = False  # the report package loads only when a summary is drawn
if TYPE_CHECKING:
    from osmosis_ai.observe.loggers import RunLog
    from osmosis_ai.outcome import OutcomeCounts
    from osmosis_ai.report.figures import RowComparison, Summary
    from osmosis_ai.report.model import Run
    from osmosis_ai.runs.run import RunEnd
    from osmosis_ai.statistics import Estimate


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


def _counted(summary: Summary, outcomes: str) -> tuple[str, str]:
    """The first row: what was counted, samples beside the rows they ran on when rows ran ``--n`` times."""
    from osmosis_ai.outcome import plural

    if summary.samples_per_row <= 1:
        return "rows", f"{summary.rows}: {outcomes}"
    per_row = (
        f"{summary.dataset_rows} {plural('row', summary.dataset_rows)} x {summary.samples_per_row}"
        if summary.dataset_rows
        else (f"{summary.samples_per_row} per row")
    )
    return "samples", f"{summary.rows} ({per_row}): {outcomes}"


def pass_at_k_lines(pass_at_k: dict[int, Estimate], gaps: dict[int, int]) -> list[tuple[int, str]]:
    """Every ``k`` with its figure, or "–" and why it has none, in order of ``k``."""
    from osmosis_ai.statistics import pass_at_k_gap_text

    lines = [(k, f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]") for k, e in pass_at_k.items()]
    lines += [(k, f"– ({pass_at_k_gap_text(k, short)})") for k, short in gaps.items()]
    return sorted(lines)


def _score_rows(name: str, scored: int, mean: Estimate | None, pass_at_k: dict[int, Estimate],
                gaps: dict[int, int], *, named: bool) -> list[tuple[str, str]]:  # fmt: skip
    score = (
        f"{mean.value:.3f} [{mean.low:.3f}, {mean.high:.3f}] over {scored} scored"
        if mean
        else "no scored rows"
    )
    suffix = f" {name}" if named else ""
    return [(f"mean {name}", score)] + [
        (f"pass@{k}{suffix}", text) for k, text in pass_at_k_lines(pass_at_k, gaps)
    ]


def summary_rows(run: Run, summary: Summary) -> list[tuple[str, str]]:
    """The summary as (figure, value) rows: every score the rows carry, each with its pass@k."""
    outcomes = ", ".join(f"{name} {n}" for name, n in summary.outcomes.items() if n) or "none"
    named = bool(summary.other_scores)  # with several scores, each pass@k says whose it is
    rows = [_counted(summary, outcomes)]
    rows += _score_rows(run.score_name, summary.scored, summary.mean_score, summary.pass_at_k,
                        summary.pass_at_k_gaps, named=named)  # fmt: skip
    for name, figures in summary.other_scores.items():
        rows += _score_rows(
            name, figures.scored, figures.mean, figures.pass_at_k, figures.pass_at_k_gaps, named=named
        )
    if any(v is not None for v in summary.latency_ms.values()):  # reward score and regrade time no answers
        latency = " / ".join(_ms(summary.latency_ms.get(p)) for p in ("p50", "p90", "p99"))
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
    if summary.tool_errors:
        rows.append(("tool errors", str(summary.tool_errors)))
    return rows


def summary_object(run: Run, summary: Summary) -> dict[str, Any]:
    """The summary as one JSON-ready object; with ``eval --baseline-model``, the paired comparison
    (``comparison``: per eval function, as in the ``-o`` file)."""
    found = {"source": run.source, "kind": run.kind, "score_name": run.score_name, **summary.to_dict()}
    if run.paired:
        found["baseline_model"] = run.baseline_source
        found["comparison"] = {f.name: f.to_dict() for f in run.paired}
    return found


def paired_rows(run: Run) -> list[tuple[str, str]]:
    """``eval --baseline-model``'s comparison as (figure, value) rows, one per eval function."""
    return [(f"vs baseline {f.name}", f.describe()) for f in run.paired]


def comparison_rows(comparison: RowComparison) -> list[tuple[str, str]]:
    """Run B against run A, row by row, as (figure, value) rows: what the page's comparison shows."""
    difference = comparison.mean_difference
    record = comparison.record
    rows = [
        ("mean difference (B - A)",
         f"{difference.value:+.3f} [{difference.low:+.3f}, {difference.high:+.3f}] over {record.total} rows"
         if difference else "no row scored in both"),
        ("rows won / lost / tied by B", f"{record.wins} / {record.losses} / {record.ties}"),
        ("rows with outcomes changed", str(comparison.outcome_changes)),
    ]  # fmt: skip
    passes = [
        (k, f"{a.value:.3f} / {b.value:.3f} ({b.value - a.value:+.3f})")
        for k, (a, b) in comparison.pass_at_k.items()
    ]
    passes += [(k, f"– ({why})") for k, why in comparison.pass_at_k_missing.items()]
    return rows + [(f"pass@{k} A / B", text) for k, text in sorted(passes)]


def print_summary(
    run: Run, summary: Summary, *, as_json: bool = False, extra: Mapping[str, Any] | None = None
) -> None:
    """The summary table on stdout, or (``as_json``) its object as one line of JSON, with ``extra``
    (what only the command knows, such as its concurrency) added."""
    if as_json:
        print_json({**summary_object(run, summary), **(extra or {})})
        return
    console.table(summary_rows(run, summary), title=f"Summary ({run.kind}: {run.source})")


def write_report(
    path: str | Path,
    results: Sequence[Run],
    *,
    title: str | None = None,
    summaries: Sequence[Summary] | None = None,
    flag: str = "--report",
) -> Path:
    """Render ``results`` into the HTML file ``path``, written by :func:`~osmosis_ai.cli.output_file.write_output`
    (whole or not at all); ``flag`` names the option in its error."""
    from osmosis_ai.cli.output_file import check_output, write_output
    from osmosis_ai.report.render import render_report

    check_output(path, flag=flag)  # a directory is refused before the page is rendered
    page = render_report(results, title=title or "Osmosis report", summaries=summaries)
    return write_output(path, page, flag=flag)


def add_summary_arguments(
    parser: argparse.ArgumentParser, *, json_flag: bool = True, log_to: bool = False
) -> None:
    """``--report FILE`` (and ``--json``, and with ``log_to`` ``--log-to``) for a command that produces results."""
    parser.add_argument(
        "--report",
        metavar="FILE.html",
        type=absolute_path,
        help="also write the HTML report of the run (see osmosis report)",
    )
    declare_files(parser, written=["report"])
    if json_flag:
        parser.add_argument(
            "--json",
            action="store_true",
            help="print the run's summary as one JSON object instead of the outcome line",
        )
    if log_to:
        add_log_to_argument(parser)


@dataclass(frozen=True)
class Outputs:
    """What a run command shows and writes besides its own lines, read from its flags once (:meth:`of`):
    ``quiet`` (``-q`` or ``--json``), ``--json``, ``-o``, ``--report``, ``--trajectories``, ``--log-to``,
    ``settings``, the flags as plain values for the experiment loggers, ``inputs``, the files the
    command reads with the label of the option naming each (no file written may replace one), and
    ``--max-failure-rate``, which decides the exit status (:meth:`failure`)."""

    quiet: bool = False
    json: bool = False
    output: str | None = None
    report: str | None = None
    trajectories: str | None = None
    log_to: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[tuple[str, str], ...] = ()
    max_failure_rate: float = 0.0

    @classmethod
    def of(cls, args: argparse.Namespace) -> Outputs:
        from osmosis_ai.cli.output_file import read_files

        get = vars(args).get
        quiet, settings = bool(get("quiet") or get("json")), run_config(args)
        if "quiet" in settings:  # what the run did: --json is quiet too
            settings["quiet"] = quiet
        return cls(quiet, bool(get("json")), get("output"), get("report"), get("trajectories"),
                   tuple(get("log_to") or ()), settings, read_files(args), get("max_failure_rate") or 0.0)  # fmt: skip

    def failure(self, counts: OutcomeCounts, unit: str) -> str | None:
        """Why the run fails by the shared rule (:func:`osmosis_ai.outcome.verdict`), if it does."""
        from osmosis_ai.outcome import verdict

        return verdict(
            counts, max_failure_rate=self.max_failure_rate, unit=unit, limit_name="--max-failure-rate"
        )


def check_run_outputs(outputs: Outputs) -> None:
    """Refuse, before any paid work, a ``-o``/``--output``, ``--report`` or ``--trajectories`` that
    could not be written."""
    from osmosis_ai.cli.output_file import check_output, check_output_directory

    for flag, path in (("--output", outputs.output), ("--report", outputs.report)):
        if path:
            check_output(path, flag=flag)
    if outputs.trajectories:
        check_output_directory(outputs.trajectories, flag="--trajectories")


def check_loggers(args: argparse.Namespace) -> None:
    """Refuse, before any paid work, a ``--log-to`` tool that could not take the run at its end."""
    tools = getattr(args, "log_to", None)
    if tools:
        from osmosis_ai.observe.loggers import check_tools

        check_tools(tools)


Figures = tuple["Run", "Summary"]


def run_figures(results: Any, source: str) -> Figures:
    """The run read from ``results`` (a results file's path, or the document still in memory) and its summary."""
    from osmosis_ai.report.figures import summarize
    from osmosis_ai.report.readers import read_document, read_results

    run = read_results(results) if isinstance(results, (str, Path)) else read_document(results, source)
    return run, summarize(run)


def show_summary(
    outputs: Outputs, results: Any, source: str, figures: Figures | None = None
) -> Figures | None:
    """The summary table every run ends with, printed just before its outcome line (not with ``-q``
    or ``--json``). ``figures`` are a command's own counts, when it kept no rows to read; the figures
    used are returned so that :func:`finish_run` does not compute them again."""
    if outputs.quiet or outputs.json:
        return figures
    figures = figures or run_figures(results, source)
    print_summary(*figures)
    return figures


def finish_run(
    outputs: Outputs,
    results: Any,
    source: str,
    figures: Figures | None = None,
    *,
    extra: Mapping[str, Any] | None = None,
    end: RunEnd | None = None,
) -> None:
    """``--report``, ``--json`` and ``--log-to`` once a run's results exist: ``results`` is the results
    file's path, or the document a command writes with ``-o`` (the ``test``/``eval`` JSON) still in
    memory. ``--json`` prints ``figures`` when given; the report needs the rows, so it reads
    ``results`` unless ``figures`` hold them; ``end``: how the run ended (see :func:`log_experiment`)."""
    report, as_json = outputs.report, outputs.json
    if report:
        run, summary = run_figures(results, source) if figures is None or not figures[0].rows else figures
        write_report(report, [run], summaries=[summary])
        say(f"Wrote report to {report}", quiet=outputs.quiet or as_json)
        figures = figures or (run, summary)
    if as_json or outputs.log_to:
        figures = figures or run_figures(results, source)
    if as_json:
        assert figures is not None
        print_summary(*figures, as_json=True, extra=extra)
    if figures is not None:
        log_experiment(outputs, figures, end)


def run_config(args: argparse.Namespace) -> dict[str, Any]:
    """The command's settings as plain values, for an experiment logger: no secrets, nothing unset."""
    from osmosis_ai._http import redact_config

    plain = (str, int, float, bool, list, tuple)
    return redact_config(
        {
            name: value
            for name, value in sorted(vars(args).items())
            if isinstance(value, plain) and not name.startswith("_") and name not in ("log_to", "func")
        }
    )


def log_experiment(
    outputs: Outputs,
    figures: Figures,
    end: RunEnd | None = None,
    *,
    more: Mapping[str, float] | None = None,
) -> None:
    """Send the finished run to each ``--log-to`` tool (nothing without the flag); one line says where.
    A rerun of a run (``end``) that had nothing left to run sends nothing to a tool its journal says
    has the results already, and says so. ``more``: a command's own figures, logged beside the run's."""
    tools = outputs.log_to
    if not tools:
        return
    from osmosis_ai.runs.journal import Journal

    quiet = outputs.quiet or outputs.json
    if (
        end is not None
        and end.idle
        and end.journal is not None
        and set(tools) <= Journal.logged_to(end.journal)
    ):
        say(f"Nothing was left to run: already logged to {', '.join(dict.fromkeys(tools))}", quiet=quiet)
        return
    from osmosis_ai.cli.errors import CLIError
    from osmosis_ai.observe.loggers import ExperimentLogError, log_run

    try:
        where = log_run(tools, experiment_log(outputs, figures, more=more))
    except ExperimentLogError as exc:
        raise CLIError(str(exc)) from None
    say_logged(outputs, where)
    if end is not None and end.journal is not None:
        Journal.note_logged(end.journal, tools)


def experiment_name(kind: str) -> str:
    """The name of a run in an experiment logger: its kind and when it was logged."""
    return f"{kind.replace(' ', '-')}-{time.strftime('%Y%m%d-%H%M%S')}"


def experiment_log(outputs: Outputs, figures: Figures, *, more: Mapping[str, float] | None = None) -> RunLog:
    """The finished run as the experiment loggers take it: its summary figures (and ``more``, a
    command's own), pass@k, scores and the first rows of its sample table."""
    from osmosis_ai.observe.loggers import MAX_SAMPLES, RunLog

    run, summary = figures
    values: dict[str, float] = {
        "rows": summary.rows,
        "completed": summary.completed,
        "scored": summary.scored,
    }
    values |= {f"outcome_{name}": n for name, n in summary.outcomes.items()}
    if summary.mean_score is not None:
        mean = summary.mean_score
        values |= {f"mean_{run.score_name}": mean.value, "mean_low": mean.low, "mean_high": mean.high}
    values |= {f"latency_{p}_ms": v for p, v in summary.latency_ms.items() if v is not None}
    tokens = {
        "prompt_tokens": summary.prompt_tokens,
        "completion_tokens": summary.completion_tokens,
        "cost_usd": summary.cost_usd,
    }
    values |= {name: v for name, v in tokens.items() if v is not None}
    values |= dict(more or {})
    samples = [
        (
            r.row,
            r.sample,
            r.outcome,
            r.scored_value,
            r.latency_ms,
            (r.prompt_tokens or 0) + (r.completion_tokens or 0),
            r.error,
        )
        for r in run.rows[:MAX_SAMPLES]
    ]
    return RunLog(
        name=experiment_name(run.kind),
        kind=run.kind,
        config={"source": run.source, **outputs.settings},
        summary={name: float(v) for name, v in values.items()},
        pass_at_k={k: e.value for k, e in summary.pass_at_k.items()},
        scores=[v for r in run.rows if (v := r.scored_value) is not None],
        samples=samples,
    )


def say_logged(outputs: Outputs, where: Sequence[str]) -> None:
    """One line per ``--log-to`` tool: where it wrote the run (``where``, in the tools' order)."""
    for tool, place in zip(dict.fromkeys(outputs.log_to), where, strict=True):
        say(f"Logged to {tool}: {place}", quiet=outputs.quiet or outputs.json)
