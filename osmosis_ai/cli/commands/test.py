"""``osmosis test``: run an agent loop in-process over a dataset, its model calls answered by LiteLLM.

Cheap local checks come first — the agent import, the dataset (opened, counted and its first row
checked, not loaded) — then one tiny preflight request to the model, and only then the rows: one after
another by default, ``--concurrency N`` (or ``auto``, following the model server) at once. Each row
prints one line with its outcome (the ``-o`` file keeps row order); the summary counts the outcomes beside the pass rate, and its last
line is printed with ``-q`` too. Exit status by the shared rule
(:func:`osmosis_ai.outcome.verdict`): 0 when every row completed (or the failures stay
within ``--max-failure-rate``), 1 with the reason otherwise; a systemic provider failure stops the
run at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import (
    add_agent_run_arguments,
    add_backend_arguments,
    add_max_concurrency_argument,
    check_backend_arguments,
    concurrency_value,
    in_process_agent,
    limit_line,
    limit_summary,
    model_ref,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import format_duration, one_line, progress_bar, say, setup_logging, wants_progress
from osmosis_ai.cli.output_file import write_output
from osmosis_ai.cli.running import INTERRUPTED, run_command
from osmosis_ai.cli.summary import Outputs, add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.cli.trajectories import add_trajectories_argument, trajectory_writer
from osmosis_ai.consts import PACKAGE_VERSION
from osmosis_ai.outcome import OutcomeCounts

if TYPE_CHECKING:
    from osmosis_ai.runs.plan import RunPlan

ERROR_PREVIEW = 200
DEBUG_DIR = "test_debug"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_agent_run_arguments(parser, unit="row")
    add_trajectories_argument(parser, unit="row")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"show library log messages and write the agents' traces to ./{DEBUG_DIR}",
    )
    add_summary_arguments(parser)
    parser.add_argument(
        "-i", "--interactive", action="store_true", help="step through rows one model answer at a time"
    )
    parser.add_argument("--row", type=whole_number(0), help="row to run first in the interactive session")
    parser.add_argument("--concurrency", type=concurrency_value, default=1, metavar="N|auto",
                        help="rows run at once (default 1: one after another); 'auto' follows the model server")  # fmt: skip
    add_max_concurrency_argument(parser, "--concurrency")
    add_backend_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.eval.report import run_member

    if args.row is not None and not args.interactive:
        raise CLIError("--row needs --interactive")
    if args.interactive and args.concurrency != 1:
        raise CLIError("--interactive runs one row at a time: drop --concurrency")
    if args.interactive and args.backend != "local":
        raise CLIError(
            f"--interactive steps through rows in this process; leave out --backend {args.backend}"
        )
    check_backend_arguments(args, args.concurrency)
    setup_logging(logging.DEBUG if args.debug else None)
    outputs = Outputs.of(args)
    check_run_outputs(outputs)
    mode = " (Interactive Mode)" if args.interactive else ""
    say(quiet=outputs.quiet, line=f"osmosis-rollout-test v{PACKAGE_VERSION}{mode}")
    plan = plan_of(args)
    report = Report(outputs, args.model, f" at {args.base_url}" if args.base_url else "", run_member(args))
    if args.interactive:
        from osmosis_ai.cli.interactive import step_through

        row = args.row
        return run_command(lambda: step_through(plan, report.outputs, row, report.model, report.at),
                           on_interrupt=_interrupted)  # fmt: skip
    return run_command(lambda: _test(plan, report), on_interrupt=_interrupted)


@dataclass(frozen=True)
class Report:
    """What the run shows and writes, read from the flags once: ``at`` says where the model is
    served, ``run`` is the ``-o`` file's ``run`` member."""

    outputs: Outputs
    model: str
    at: str
    run: dict[str, Any]


def _interrupted() -> int:
    print("Interrupted.", file=sys.stderr)
    return INTERRUPTED


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for: the agent's own reward scores each row; no journal."""
    from osmosis_ai.runs.items import PRIMARY
    from osmosis_ai.runs.plan import Rows, RunPlan

    executor = in_process_agent(args, ((PRIMARY, model_ref(args)),), "test", DEBUG_DIR)
    return RunPlan(Rows(args.dataset, args.offset, args.limit), executor, concurrency=args.concurrency,
                   max_concurrency=args.max_concurrency, timeout=args.timeout, backend=args.backend,
                   ray_address=args.ray_address)  # fmt: skip


async def _test(plan: RunPlan, report: Report) -> int:
    from osmosis_ai.runs.events import ModelChecked, Opened, Ready
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.run import run
    from osmosis_ai.runs.summary import test_document

    outputs, quiet = report.outputs, report.outputs.quiet
    model = report.model
    trajectories = trajectory_writer(outputs, command="test")
    results: list[Result] = []
    selected = 0
    bar = False

    def advance(**_: Any) -> None:  # the progress bar's step, once the items start
        pass

    def show(result: Result) -> None:
        results.append(result)
        if trajectories is not None:
            trajectories.write_result(result, model=model)
        advance(score=result.reward if result.success else None, failed=not result.success)
        if bar and result.success:
            return
        attempt = result.attempt
        status = "OK" if result.success else f"FAILED [{result.outcome.value}]"
        line = (
            f"[{len(results)}/{selected}] Row {result.item.row_index}: {status} "
            f"({format_duration(attempt.duration_ms)}, {attempt.tokens:,} tokens)"
        )
        if result.error and not result.success:
            line += " - " + one_line(result.error, ERROR_PREVIEW)
        say(quiet=quiet, line=line)

    def on_event(event: Any) -> None:
        nonlocal selected, bar, advance
        if isinstance(event, Result):
            show(event)
        elif isinstance(event, Opened):
            selected = event.rows
            say(quiet=quiet, line=f"Dataset: {event.dataset} ({event.rows_in_file} rows, running {selected})")
        elif isinstance(event, ModelChecked):
            say(quiet=quiet, line=f"Model: {event.display_name}{report.at}")
        elif isinstance(event, Ready):
            if event.backend:
                say(event.backend, quiet=quiet)
            # On a terminal a bar counts the rows and only failed rows get a line; piped, every row does.
            bar = not quiet and wants_progress(None, selected, sys.stdout)
            advance = stack.enter_context(progress_bar(selected, "rows", enabled=bar, stderr=False))

    with contextlib.ExitStack() as stack:
        end = await run(plan, on_event)
    if (concurrency := limit_line(end.limit)) is not None:
        say(quiet=quiet, line=concurrency)
    stop = end.stop
    document = test_document(results, stop=stop, model=model, run=report.run)
    summary = document["summary"]
    counts = OutcomeCounts.of(r.outcome for r in results)
    # One summary: the table below (outcomes, reward, latency, tokens); what it has no row for here.
    if summary["retried_calls"]:
        say(
            quiet=quiet, line=f"Retried model calls: {summary['retried_calls']} (transient provider failures)"
        )
    line = counts.describe("row")
    rewards = [r.reward for r in results if r.success and r.reward is not None]
    if rewards:
        line += f"; mean reward {sum(rewards) / len(rewards):.3f} over {len(rewards)} completed"
    if stop is not None:
        line += f"; stopped after {counts.total} of {selected} rows"
    line += end.backend_note
    source = str(outputs.output or "osmosis test")
    figures = show_summary(outputs, document, source)
    say(line, quiet=outputs.json)
    if outputs.output is not None:
        write_output(
            outputs.output, json.dumps(document, indent=2, ensure_ascii=False) + "\n", flag="--output"
        )
        say(quiet=quiet, line=f"Results written to: {outputs.output}")
    if trajectories is not None:
        say(
            quiet=quiet,
            line=f"Trajectories written to: {outputs.trajectories} ({trajectories.count} ATIF files)",
        )
    finish_run(outputs, document, source, figures, extra={"concurrency": limit_summary(end.limit)}, end=end)
    if stop is not None:
        raise CLIError(f"the run stopped: {stop}")
    if (reason := outputs.failure(counts, "row")) is not None:
        raise CLIError(reason)
    return 0
