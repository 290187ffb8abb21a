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

``--rubric ID`` (with ``-c CONFIG``) scores the rows with a rubric's LLM judge instead, in this
process (regrade's judge function), ``--concurrency N`` rows at once or ``auto`` following the
judge's server (:mod:`osmosis_ai.models.concurrency`; the summary and ``--json`` say what it did).

Three parts, as for ``osmosis eval``: :func:`_prepare` checks everything and opens the journal,
:func:`_engine` runs the rows still to score, :func:`_render` prints the summary (outcomes, the mean
score with its interval), the distribution of the scores and the failed rows, writes ``-o`` (one JSON
line per row, in row order) and ``--report``, and decides the exit status by the shared failure-rate
rule.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import (
    absolute_path,
    add_backend_arguments,
    add_journal_arguments,
    add_log_to_argument,
    add_max_concurrency_argument,
    add_reward_runtime_arguments,
    check_backend_arguments,
    concurrency_value,
    fraction,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import interrupted, say
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import add_summary_arguments
from osmosis_ai.consts import PACKAGE_VERSION

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from osmosis_ai._pool import Limit
    from osmosis_ai.runs.answers import Columns
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.journal import Journal

REWARD = "reward"
JUDGE_CONCURRENCY = 8  # a judge is a provider's rate limit away from failing: eval-rubric's default
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
    grader.add_argument("-f", "--function", metavar="MODULE:FN",
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
    add_reward_runtime_arguments(score, what="the reward", prefix="--")
    score.add_argument("--max-failure-rate", type=fraction, default=0.0, metavar="FRACTION",
                       help="share of rows (0-1) that may fail without failing the command (default 0)")  # fmt: skip
    score.add_argument("-o", "--output", metavar="OUT.jsonl", type=absolute_path,
                       help="write one JSON line per row, in row order: row_index, score, outcome, error "
                       "and the row's own fields")  # fmt: skip
    declare_files(score, read=["dataset", "config"], written=["output"])
    add_journal_arguments(score, unit="row", failed="whose reward timed out or crashed")
    add_summary_arguments(score)
    add_log_to_argument(score)
    add_backend_arguments(score)
    score.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")


def run(args: argparse.Namespace) -> int:
    check_backend_arguments(args)
    if not args.rubric:
        if args.config or args.concurrency is not None or args.max_concurrency is not None:
            raise CLIError(
                "-c/--config, --concurrency and --max-concurrency go with --rubric; a reward function's "
                "rows in flight follow its workers (--workers)"
            )
    elif args.backend == "ray":
        raise CLIError(
            "--rubric judges in this process (its calls wait on the judge's server); drop --backend ray"
        )
    args.quiet = args.quiet or args.json
    return run_command(lambda: _score(args), on_interrupt=lambda: interrupted("row"))


@dataclass
class _Plan:
    """What :func:`_prepare` checked: the dataset, its columns, the runtime and the journal."""

    dataset: Path
    rows: int
    columns: Columns
    runtime: Any
    """The reward runtime of ``-f``; ``None`` with ``--rubric``."""
    journal: Journal
    limit: Limit
    """Rows scored at once: the runtime's, or with ``--rubric`` fixed or ``auto``."""
    rubric: Any = None
    """With ``--rubric``: its :class:`~osmosis_ai.cli.eval_rubric.config.RubricConfig`."""


async def _score(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.journals import kept_if_used

    plan = _prepare(args)
    with kept_if_used(plan.journal):
        keys = [(row, 0) for row in range(plan.rows)]
        todo = len(plan.journal.to_run(keys, retry_failed=args.retry_failed))
        if todo < plan.rows:
            _say_resuming(args, plan, done=plan.rows - todo)
        if todo:
            await _engine(args, plan, todo)
        if not plan.journal.to_run(keys):
            plan.journal.mark("completed")
        records = plan.journal.records()
    return _render(args, plan, records)


def _prepare(args: argparse.Namespace) -> _Plan:
    """The local checks, before any worker starts: the outputs, the reward, the dataset and its
    first row, the journal."""
    from osmosis_ai.cli.journals import open_journal
    from osmosis_ai.cli.loading import reward_runtime, source_digest
    from osmosis_ai.cli.summary import check_run_outputs
    from osmosis_ai.runs.answers import Columns, RowRefused
    from osmosis_ai.runs.dataset import count_rows, dataset_format, iter_raw
    from osmosis_ai.runs.journal import file_digest
    from osmosis_ai.runs.journal_store import journal_path, journal_root

    say(f"osmosis-reward-score v{PACKAGE_VERSION}", quiet=args.quiet)
    check_run_outputs(args)
    dataset = Path(args.dataset)
    runtime = rubric = None
    if args.rubric:
        from osmosis_ai.cli.arguments import run_limit
        from osmosis_ai.cli.eval_rubric.session import judging_rubric, locate_config
        from osmosis_ai.judge.keys import configured_api_base

        config_path = locate_config(args.config, dataset)
        rubric = judging_rubric(config_path, args.rubric)
        grader = f"--rubric {args.rubric} -c {config_path}"
        digest = f"{args.rubric}@{file_digest(config_path)}"
        limit = run_limit(
            args.concurrency or JUDGE_CONCURRENCY, args, base_url=configured_api_base(rubric.model_info)
        )
    else:
        from osmosis_ai._pool import FixedLimit

        runtime = reward_runtime(args.function, args, kind="reward function")
        grader, digest = args.function, f"{args.function}@{source_digest(runtime.target.function)}"
        limit = FixedLimit(runtime.in_flight)
    columns = Columns(args.solution_column, args.ground_truth_column, args.extra_info_column,
                      text_cells=dataset_format(dataset) == "csv")  # fmt: skip
    rows = count_rows(dataset)
    first = next(iter_raw(dataset), None)
    if first is None:
        raise CLIError(f"{dataset}: no rows to score")
    try:
        columns.sample_of_row(first.index, first.value)
    except RowRefused as exc:
        raise CLIError(
            f"{dataset}: {exc}; name the columns with --solution-column, --ground-truth-column "
            "and --extra-info-column"
        ) from None
    named = [
        grader,
        str(dataset.resolve()),
        [columns.solution, columns.ground_truth, columns.extra_info],
    ]
    task_id = hashlib.sha256(json.dumps(named).encode()).hexdigest()[:12]
    description = {
        "reward": digest,
        "dataset": file_digest(dataset),
        "columns": named[2],
    }
    path = (
        Path(args.journal) if args.journal else journal_path(journal_root(), "reward-score", dataset, task_id)
    )
    labels = {"model": "reward-score", "dataset": args.dataset, "module": grader}
    journal = open_journal(path, description, fresh=args.fresh, labels=labels)
    say(f"Dataset: {dataset} ({rows} rows); journal {path}", quiet=args.quiet)
    return _Plan(dataset, rows, columns, runtime, journal, limit, rubric)


def _say_resuming(args: argparse.Namespace, plan: _Plan, *, done: int) -> None:
    from osmosis_ai.cli.journals import resuming_line
    from osmosis_ai.runs.journal import RETRIED_WITH_RETRY_FAILED

    failed = sum(o in RETRIED_WITH_RETRY_FAILED for _, o in plan.journal.outcomes())
    line = resuming_line(done, plan.rows, "row", failed=failed, retry_failed=args.retry_failed)
    say(line, quiet=args.quiet)


async def _engine(args: argparse.Namespace, plan: _Plan, todo: int) -> None:
    """Score the rows the journal does not have yet, each committed before it counts: here, or on
    Ray workers that each score with a reward runtime of their own."""
    from osmosis_ai.cli.backend import run_backend, worker_settings
    from osmosis_ai.cli.output import progress_bar, wants_progress
    from osmosis_ai.models.concurrency import AdaptiveLimit
    from osmosis_ai.runs.dataset import iter_raw
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.items import WorkItem, work_items

    finished = plan.journal.finished_in_order(retry_failed=args.retry_failed)

    def skip(item: WorkItem) -> bool:
        return finished(item.row_index, item.sample_index)

    rows = ((raw.index, raw.value) for raw in iter_raw(plan.dataset))
    bar = not args.quiet and wants_progress(None, todo)
    if plan.rubric is not None:
        say(f"Scoring: the judge of rubric {plan.rubric.rubric_id!r}", quiet=args.quiet)
    elif args.backend != "ray":
        say(f"Scoring: {plan.runtime.describe()}", quiet=args.quiet)

    def local() -> contextlib.AbstractAsyncContextManager[Pipeline]:
        if plan.rubric is not None:
            return _judge_pipeline(plan.rubric, plan.columns, plan.limit)
        return _pipeline(plan.runtime, plan.columns)

    backend_context = run_backend(args, local, factory=f"{__name__}:ray_worker", settings=worker_settings(args),
                                  concurrency=plan.limit.ceiling)  # fmt: skip
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(plan.limit, AdaptiveLimit):
            stack.push_async_callback(plan.limit.aclose)  # its server-metrics reader
        backend = await stack.enter_async_context(backend_context)
        process = await backend.ready()
        if header := backend.header():
            say(header, quiet=args.quiet)
        with progress_bar(todo, "rows", enabled=bar) as advance:
            await run_items(
                work_items(rows, skip=skip),
                process,
                concurrency=plan.limit,
                journal=plan.journal,
                on_result=lambda _: advance(),
            )


@contextlib.asynccontextmanager
async def _pipeline(runtime: Any, columns: Columns) -> AsyncIterator[Pipeline]:
    """The stored answers scored by ``runtime``, whose worker processes end with the run, however it ends."""
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.stored import StoredExecutor
    from osmosis_ai.runs.scorer import Scorer, runtime_function

    scorer = Scorer([runtime_function(runtime, REWARD, sample_of=columns.sample)], reward=REWARD)
    async with runtime:
        yield Pipeline(StoredExecutor(columns.attempt), scorer)


@contextlib.asynccontextmanager
async def _judge_pipeline(rubric: Any, columns: Columns, limit: Limit) -> AsyncIterator[Pipeline]:
    """The stored answers judged with ``rubric`` here, each judge request told to ``limit`` when it adapts."""
    from osmosis_ai.cli.commands.regrade import judge_function
    from osmosis_ai.models.concurrency import observer_of
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.stored import StoredExecutor
    from osmosis_ai.runs.scorer import Scorer

    judge = judge_function(rubric, cache=False, observer=observer_of(limit),
                           ground_truth=lambda item, attempt: columns.sample(item, attempt).ground_truth)  # fmt: skip
    yield Pipeline(StoredExecutor(columns.attempt), Scorer([judge], reward="score"))


@contextlib.asynccontextmanager
async def ray_worker(settings: Mapping[str, Any], share: int) -> AsyncIterator[Pipeline]:
    """One Ray worker's pipeline for ``osmosis reward score --backend ray``: the same reward, loaded by
    name, in a reward runtime of the worker's own."""
    from osmosis_ai.cli.loading import reward_runtime
    from osmosis_ai.runs.answers import Columns
    from osmosis_ai.runs.dataset import dataset_format

    args = argparse.Namespace(**settings)
    columns = Columns(args.solution_column, args.ground_truth_column, args.extra_info_column,
                      text_cells=dataset_format(Path(args.dataset)) == "csv")  # fmt: skip
    async with _pipeline(reward_runtime(args.function, args, kind="reward function"), columns) as pipeline:
        yield pipeline


def _render(args: argparse.Namespace, plan: _Plan, records: dict[tuple[int, int], Any]) -> int:
    from osmosis_ai.cli.arguments import limit_line, limit_summary
    from osmosis_ai.cli.output_file import write_output
    from osmosis_ai.cli.summary import finish_run, show_summary
    from osmosis_ai.outcome import OutcomeCounts, verdict
    from osmosis_ai.runs.answers import output_line
    from osmosis_ai.runs.dataset import iter_raw

    lines = [
        output_line(raw.index, raw.value, records[(raw.index, 0)].data)
        for raw in iter_raw(plan.dataset)
        if (raw.index, 0) in records
    ]
    counts = OutcomeCounts.of(record.outcome for record in records.values())
    source = args.output or "osmosis reward score"
    if (concurrency := limit_line(plan.limit)) is not None:
        say(concurrency, quiet=args.quiet)
    figures = show_summary(args, lines, source)
    if not args.quiet:
        _show_distribution(lines)
        _show_failures(lines)
    say(counts.describe("row"), quiet=args.json)
    if args.output:
        text = "".join(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in lines)
        write_output(args.output, text, flag="--output")
        say(f"Wrote {len(lines)} rows to {args.output}", quiet=args.quiet)
    failures = [_failure(line) for line in lines if line["outcome"] != "completed"]
    extra = {"distribution": _distribution(lines), "failures": failures, "output": args.output,
             "concurrency": limit_summary(plan.limit)}  # fmt: skip
    finish_run(args, lines, source, figures, extra=extra)
    reason = verdict(
        counts, max_failure_rate=args.max_failure_rate, unit="row", limit_name="--max-failure-rate"
    )
    if reason is None and counts.total < plan.rows:
        reason = f"{plan.rows - counts.total} of {plan.rows} rows were not scored"
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
