"""``osmosis reward score``: score a dataset of answers with a reward function, isolated and killable.

Each row holds an answer (``solution_str``), its ``ground_truth`` and optionally ``extra_info``
(other names: ``--solution-column``, ``--ground-truth-column``, ``--extra-info-column``), read from
JSONL, CSV or Parquet by the one dataset reader. The rows run on the run engine like any other work:
the stored executor makes each row's answer an attempt (:mod:`osmosis_ai.runs.answers`), the one
scorer scores it in the reward runtime — worker processes by default, so a reward past ``--timeout``
is killed and its row is ``reward_timeout``, and one that takes its worker down is ``reward_crash`` —
and every row is committed to a journal before it counts, so an interrupted run resumes where it
stopped (``--journal``, ``--fresh`` and ``--retry-failed`` as for ``osmosis eval``). A row that cannot
be scored as given is a ``reward_error`` saying why; a dataset whose first row cannot be is refused
before any worker starts.

``--rubric ID`` (with ``-c CONFIG``) scores the rows with a rubric's LLM judge instead
(:mod:`osmosis_ai.runs.judging`), ``--concurrency N`` rows at once or ``auto`` following the judge's
server (:mod:`osmosis_ai.models.concurrency`; the summary and ``--json`` say what it did).

As every run command: flag checks (:func:`run`) -> the plan (:func:`plan_of`, the stored answers of
:class:`~osmosis_ai.runs.executors.stored.AnswerDataset`) -> :func:`osmosis_ai.runs.run.run` ->
:func:`_render`: the summary (outcomes, the mean score with its interval), the distribution of the
scores and the failed rows, ``-o`` (one JSON line per row, in row order) and ``--report``, and the
exit status by the shared failure-rate rule.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import (
    absolute_path,
    add_backend_arguments,
    add_journal_arguments,
    add_max_concurrency_argument,
    add_reward_runtime_arguments,
    check_backend_arguments,
    concurrency_value,
    fraction,
    journal_spec,
    reward_limits,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import interrupted, say
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import Outputs, add_summary_arguments, check_run_outputs
from osmosis_ai.consts import PACKAGE_VERSION
from osmosis_ai.runs.judging import JUDGE_CONCURRENCY

if TYPE_CHECKING:
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.run import RunEnd

REWARD = "reward"
SHOWN_FAILURES = 20
BAR_WIDTH = 30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="reward_command", metavar="{score}", required=True)
    score = sub.add_parser(
        "score",
        help="score a dataset of answers with a reward function, in worker processes it cannot stall",
        description="Score each row's answer (solution_str) against its ground_truth with a reward "
        "function, in worker processes that a hung or crashing reward cannot take down; resumable.",
    )
    grader = score.add_mutually_exclusive_group(required=True)
    grader.add_argument("-f", "--reward", "--function", dest="function", metavar="MODULE:FN",
                        help="the reward, e.g. my_rewards:exact: fn(solution_str, ground_truth, extra_info) "
                        "or fn(messages, ground_truth, metadata), sync or async")  # fmt: skip
    grader.add_argument("--rubric", metavar="ID",
                        help="score with the LLM judge of this rubric (see eval-rubric), in this process")  # fmt: skip
    score.add_argument("-c", "--config", type=Path, metavar="CONFIG",
                       help="with --rubric: the rubric config YAML (default: rubric_configs.yaml next to the "
                       "dataset, in the current directory, or in ./examples)")  # fmt: skip
    score.add_argument("--concurrency", type=concurrency_value, metavar="N|auto",
                       help=f"with --rubric: rows judged at once (default {JUDGE_CONCURRENCY}), or 'auto' to "
                       "follow what the judge's server can take")  # fmt: skip
    add_max_concurrency_argument(score, "--concurrency")
    score.add_argument("-d", "--dataset", required=True, type=absolute_path,
                       help="answers to score (.jsonl, .csv, .parquet) with solution_str, ground_truth "
                       "and optional extra_info columns")  # fmt: skip
    score.add_argument("--solution-column", default="solution_str", metavar="NAME",
                       help="the column holding the answer (default solution_str)")  # fmt: skip
    score.add_argument("--ground-truth-column", default="ground_truth", metavar="NAME",
                       help="the column holding the ground truth (default ground_truth)")  # fmt: skip
    score.add_argument("--extra-info-column", default="extra_info", metavar="NAME",
                       help="the column holding extra_info, an object (default extra_info; a JSON "
                       "object in a CSV file)")  # fmt: skip
    add_reward_runtime_arguments(score, what="the reward", prefixes=("--", "--reward-"))
    score.add_argument("--max-failure-rate", type=fraction, default=0.0, metavar="FRACTION",
                       help="share of rows (0-1) that may fail without failing the command (default 0)")  # fmt: skip
    score.add_argument("-o", "--output", metavar="OUT.jsonl", type=absolute_path,
                       help="write one JSON line per row, in row order: row_index, score, outcome, error "
                       "and the row's own fields")  # fmt: skip
    declare_files(score, read=["dataset", "config"], written=["output"])
    add_journal_arguments(score, unit="row", failed="whose reward timed out or crashed")
    add_summary_arguments(score, log_to=True)
    add_backend_arguments(score)
    score.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")


def run(args: argparse.Namespace) -> int:
    check_backend_arguments(args)
    if not args.rubric and (args.config or args.concurrency is not None or args.max_concurrency is not None):
        raise CLIError(
            "-c/--config, --concurrency and --max-concurrency go with --rubric; a reward function's "
            "rows in flight follow its workers (--workers)"
        )
    if args.rubric and args.backend != "local":
        raise CLIError(
            f"--rubric judges in this process (its calls wait on the judge's server); drop --backend {args.backend}"
        )
    outputs = Outputs.of(args)
    say(f"osmosis-reward-score v{PACKAGE_VERSION}", quiet=outputs.quiet)
    check_run_outputs(outputs)
    plan = plan_of(args)
    return run_command(lambda: _score(plan, outputs), on_interrupt=lambda: interrupted("row"))


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for: the dataset's answers, scored by ``-f`` or the rubric's judge."""
    from osmosis_ai.runs.answers import Columns
    from osmosis_ai.runs.dataset import dataset_format
    from osmosis_ai.runs.executors.stored import AnswerDataset, StoredAnswers
    from osmosis_ai.runs.pipeline import runtimes
    from osmosis_ai.runs.plan import Rows, RunPlan, Scoring

    base_url = None
    if args.rubric:
        from osmosis_ai.cli.eval_rubric.session import rubric_scoring

        scoring, grader, base_url = rubric_scoring(args.rubric, args.config, Path(args.dataset), cache=False)
        concurrency = args.concurrency or JUDGE_CONCURRENCY
    else:
        grader = args.function
        scoring = Scoring((args.function,), kind="reward function", names=(REWARD,), reward=REWARD,
                          **reward_limits(args))  # fmt: skip
        concurrency = runtimes(scoring)[0].in_flight
    columns = Columns(args.solution_column, args.ground_truth_column, args.extra_info_column,
                      text_cells=dataset_format(args.dataset) == "csv")  # fmt: skip
    executor = StoredAnswers(AnswerDataset(args.dataset, columns), "reward-score", grader, base_url)
    return RunPlan(Rows(args.dataset), executor, scoring, concurrency=concurrency,
                   max_concurrency=args.max_concurrency, journal=journal_spec(args), backend=args.backend,
                   ray_address=args.ray_address)  # fmt: skip


async def _score(plan: RunPlan, outputs: Outputs) -> int:
    from osmosis_ai.cli.arguments import limit_line
    from osmosis_ai.cli.progress import run_plan
    from osmosis_ai.runs.answers import RowRefused
    from osmosis_ai.runs.events import Opened
    from osmosis_ai.runs.executors.stored import grader_of

    dataset, grader = plan.rows.dataset, grader_of(plan)
    labels = {"model": "reward-score", "dataset": dataset, "module": grader}

    def opening(event: Opened) -> str:
        return f"Dataset: {event.dataset} ({event.rows} rows); journal {event.journal}"

    try:
        end = await run_plan(plan, labels, quiet=outputs.quiet, unit="row", label="rows", opening=opening)
    except RowRefused as exc:
        raise CLIError(f"{dataset}: {exc}; name the columns with --solution-column, --ground-truth-column "
                       "and --extra-info-column") from None  # fmt: skip
    if (concurrency := limit_line(end.limit)) is not None:
        say(concurrency, quiet=outputs.quiet)
    return _render(outputs, plan, end)


def _render(outputs: Outputs, plan: RunPlan, end: RunEnd) -> int:
    from osmosis_ai.cli.arguments import limit_summary
    from osmosis_ai.cli.output_file import write_output
    from osmosis_ai.cli.summary import finish_run, show_summary
    from osmosis_ai.outcome import OutcomeCounts
    from osmosis_ai.runs.answers import output_lines
    from osmosis_ai.runs.journal import PRIMARY

    quiet = outputs.quiet
    lines = output_lines(plan.rows.dataset, end.records[PRIMARY])
    counts = OutcomeCounts.of(record.outcome for record in end.records[PRIMARY])
    source = outputs.output or "osmosis reward score"
    figures = show_summary(outputs, lines, source)
    if not quiet:
        _show_distribution(lines)
        _show_failures(lines)
    say(counts.describe("row"), quiet=outputs.json)
    if outputs.output:
        text = "".join(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in lines)
        write_output(outputs.output, text, flag="--output")
        say(f"Wrote {len(lines)} rows to {outputs.output}", quiet=quiet)
    failures = [_failure(line) for line in lines if line["outcome"] != "completed"]
    extra = {"distribution": _distribution(lines), "failures": failures, "output": outputs.output,
             "concurrency": limit_summary(end.limit)}  # fmt: skip
    finish_run(outputs, lines, source, figures, extra=extra, end=end)
    reason = outputs.failure(counts, "row")
    if reason is None and counts.total < end.planned:
        reason = f"{end.planned - counts.total} of {end.planned} rows were not scored"
    if reason is not None:
        raise CLIError(reason)
    return 0


def _scores(lines: list[dict[str, Any]]) -> list[float]:
    return [line["score"] for line in lines if line["outcome"] == "completed" and line["score"] is not None]


def _distribution(lines: list[dict[str, Any]]) -> list[dict[str, float | int]]:
    """The scores of the completed rows in bins (a handful of distinct values: one bin each)."""
    from osmosis_ai.report.charts import bins

    return [{"low": low, "high": high, "rows": n} for low, high, n in bins(_scores(lines))]


def _show_distribution(lines: list[dict[str, Any]]) -> None:
    from osmosis_ai.cli.output import console

    table = _distribution(lines)
    if not table:
        return
    tallest = max(int(b["rows"]) for b in table)
    rows = [
        [f"{b['low']:g}" if b["low"] == b["high"] else f"{b['low']:.3g} to {b['high']:.3g}", str(b["rows"]),
         "#" * max(1, round(BAR_WIDTH * int(b["rows"]) / tallest))]
        for b in table
    ]  # fmt: skip
    console.table(rows, title="Scores of the completed rows", headers=["SCORE", "ROWS", ""])


def _failure(line: dict[str, Any]) -> dict[str, Any]:
    return {"row_index": line["row_index"], "outcome": line["outcome"], "error": line["error"]}


def _show_failures(lines: list[dict[str, Any]]) -> None:
    from osmosis_ai.cli.output import console, one_line

    failed = [line for line in lines if line["outcome"] != "completed"]
    if not failed:
        return
    rows = [[str(line["row_index"]), line["outcome"], one_line(str(line["error"]), 120)] for line in failed]
    title = "Failed rows" + (f" (the first {SHOWN_FAILURES} of {len(failed)}; -o has them all)"
                             if len(failed) > SHOWN_FAILURES else "")  # fmt: skip
    console.table(rows[:SHOWN_FAILURES], title=title, headers=["ROW", "OUTCOME", "ERROR"])
