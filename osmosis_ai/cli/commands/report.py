"""``osmosis report RESULTS... [-o report.html]``: one self-contained HTML page for results files.

Each file is the output of ``rollout run -o``, ``test -o``, ``eval -o`` or ``eval-rubric -o``, or
a run's journal; the format is told by content. With several files, each later one is compared row
by row with the first (``osmosis report before.jsonl after.jsonl``). The command prints each run's
short summary, an ``eval --baseline-model`` run's paired comparison with its baseline, each
comparison of a later run with the first (mean difference, rows won, lost and tied, pass@k side by
side) — ``--json``: all of it as one JSON object — and the path of the page. ``--merge`` reads the files as the
``--offset``/``--limit`` shards of one run and reports them as that run
(:mod:`osmosis_ai.report.merge`).
"""

from __future__ import annotations

import argparse

from osmosis_ai.cli.arguments import finite_number
from osmosis_ai.cli.output_file import declare_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS",
        help="results files (JSON or JSONL), a run's journal (.sqlite), or ATIF trajectories (a file or a directory of them)",
    )
    parser.add_argument("-o", "--output", default="report.html", metavar="FILE.html",
                        help="where to write the page (default report.html)")  # fmt: skip
    declare_files(parser, read=["results"], written=["output"])
    parser.add_argument("--title", help="title of the page (default 'Osmosis report')")
    parser.add_argument("--pass-threshold", type=finite_number(), metavar="SCORE",
                        help="a sample passes (pass@k) when its score is at least this "
                        "(default: the file's own, else 1.0)")  # fmt: skip
    parser.add_argument(
        "--model", help="model name to price the tokens with, for files that do not record one"
    )
    parser.add_argument("--merge", action="store_true",
                        help="the files are shards of one eval/test run (--offset/--limit): report them as "
                        "one run (refused for files of different runs or overlapping rows)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the summaries as one JSON object")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the path of the page")


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.output import console, print_json, say
    from osmosis_ai.cli.summary import (
        comparison_rows,
        paired_rows,
        print_summary,
        summary_object,
        write_report,
    )
    from osmosis_ai.report.figures import compare_rows, summarize
    from osmosis_ai.report.readers import read_results
    from osmosis_ai.runs.journal_report import read_journal

    runs = [read_results(path, journals=read_journal) for path in args.results]
    if args.merge:
        from osmosis_ai.report.merge import merge_shards

        runs = [merge_shards(runs)]
    for results in runs:
        if args.pass_threshold is not None:
            results.pass_threshold = args.pass_threshold
        if args.model and not results.model:
            results.model = args.model
    summaries = [summarize(results) for results in runs]
    target = write_report(args.output, runs, title=args.title, summaries=summaries, flag="-o")
    comparisons = [compare_rows(runs[0], later) for later in runs[1:]]  # as the page compares
    if args.json:
        objects = [summary_object(r, s) for r, s in zip(runs, summaries, strict=True)]
        print_json(
            {"report": str(target), "runs": objects, "comparisons": [c.to_dict() for c in comparisons]}
        )
        return 0
    if not args.quiet:
        for results, summary in zip(runs, summaries, strict=True):
            print_summary(results, summary)
            if results.paired:
                console.table(
                    paired_rows(results), title=f"Paired with the baseline {results.baseline_source}"
                )
        for comparison in comparisons:
            title = f"B vs A ({comparison.after.source} against {comparison.before.source})"
            console.table(comparison_rows(comparison), title=title)
    size = target.stat().st_size
    say(quiet=False, line=f"Wrote {target} ({size / 1024:,.0f} KB)")
    return 0
