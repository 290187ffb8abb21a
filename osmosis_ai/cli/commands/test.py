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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import (
    add_agent_run_arguments,
    add_backend_arguments,
    add_max_concurrency_argument,
    check_backend_arguments,
    concurrency_value,
    limit_line,
    limit_summary,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import progress_bar, say, setup_logging, wants_progress
from osmosis_ai.cli.running import INTERRUPTED, run_command
from osmosis_ai.cli.summary import add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.cli.trajectories import add_trajectories_argument, trajectory_writer
from osmosis_ai.consts import PACKAGE_VERSION
from osmosis_ai.outcome import OutcomeCounts, verdict

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


def format_duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f}ms"
    if ms < 60000:
        return f"{ms / 1000:.1f}s"
    minutes, rest = divmod(ms / 1000, 60)
    return f"{int(minutes)}m{rest:.1f}s"


def run(args: argparse.Namespace) -> int:
    if args.row is not None and not args.interactive:
        raise CLIError("--row needs --interactive")
    if args.interactive and args.concurrency != 1:
        raise CLIError("--interactive runs one row at a time: drop --concurrency")
    if args.interactive and args.backend == "ray":
        raise CLIError("--interactive steps through rows in this process; leave out --backend ray")
    check_backend_arguments(args)
    if args.backend == "ray" and args.concurrency == "auto":
        raise CLIError(
            "--concurrency auto follows one process's model calls; give --concurrency N with --backend ray"
        )
    setup_logging(logging.DEBUG if args.debug else None)
    args.quiet = args.quiet or args.json
    return run_command(lambda: _test(args), on_interrupt=_interrupted)


def _interrupted() -> int:
    print("Interrupted.", file=sys.stderr)
    return INTERRUPTED


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for: the agent's own reward scores each row; no journal."""
    from osmosis_ai.cli.commands.eval import completion_params
    from osmosis_ai.cli.loading import agent_ref
    from osmosis_ai.runs.executors.local import InProcessAgent
    from osmosis_ai.runs.items import PRIMARY
    from osmosis_ai.runs.plan import ModelRef, Rows, RunPlan

    model = ModelRef(args.model, args.base_url, args.api_key)
    executor = InProcessAgent(agent_ref(args), ((PRIMARY, model),), "test", max_turns=args.max_turns,
                              completion_params=completion_params(args),
                              debug_dir=DEBUG_DIR if args.debug else None)  # fmt: skip
    return RunPlan(Rows(args.dataset, args.offset, args.limit), executor, concurrency=args.concurrency,
                   max_concurrency=args.max_concurrency, timeout=args.timeout, backend=args.backend,
                   ray_address=args.ray_address)  # fmt: skip


async def _test(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.eval.report import run_member
    from osmosis_ai.runs.events import ModelChecked, Opened, Ready
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.run import run

    output = Path(args.output) if args.output else None
    check_run_outputs(args)
    mode = " (Interactive Mode)" if args.interactive else ""
    say(quiet=args.quiet, line=f"osmosis-rollout-test v{PACKAGE_VERSION}{mode}")
    plan = plan_of(args)
    if args.interactive:
        return await _interactive(args, plan)
    trajectories = trajectory_writer(args, command="test")
    results: list[Result] = []
    selected = 0
    bar = False

    def advance(**_: Any) -> None:  # the progress bar's step, once the items start
        pass

    def show(result: Result) -> None:
        results.append(result)
        if trajectories is not None:
            trajectories.write_result(result, model=args.model)
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
            error = " ".join(result.error.split())
            line += " - " + (error if len(error) <= ERROR_PREVIEW else error[: ERROR_PREVIEW - 3] + "...")
        say(quiet=args.quiet, line=line)

    def on_event(event: Any) -> None:
        nonlocal selected, bar, advance
        if isinstance(event, Result):
            show(event)
        elif isinstance(event, Opened):
            selected = event.rows
            say(
                quiet=args.quiet,
                line=f"Dataset: {event.dataset} ({event.rows_in_file} rows, running {selected})",
            )
        elif isinstance(event, ModelChecked):
            at = f" at {args.base_url}" if args.base_url else ""
            say(quiet=args.quiet, line=f"Model: {event.display_name}{at}")
        elif isinstance(event, Ready):
            if event.backend:
                say(event.backend, quiet=args.quiet)
            # On a terminal a bar counts the rows and only failed rows get a line; piped, every row does.
            bar = not args.quiet and wants_progress(None, selected, sys.stdout)
            advance = stack.enter_context(progress_bar(selected, "rows", enabled=bar, stderr=False))

    with contextlib.ExitStack() as stack:
        end = await run(plan, on_event)
    results.sort(key=lambda r: r.item.row_index)
    if (concurrency := limit_line(end.limit)) is not None:
        say(quiet=args.quiet, line=concurrency)
    stop = end.stop
    counts = OutcomeCounts.of(r.outcome for r in results)
    duration = sum(r.attempt.duration_ms for r in results)
    tokens = sum(r.attempt.tokens for r in results)
    retries = sum(r.attempt.retries for r in results)
    # One summary: the table below (outcomes, reward, latency, tokens); what it has no row for here.
    if retries:
        say(quiet=args.quiet, line=f"Retried model calls: {retries} (transient provider failures)")
    line = counts.describe("row")
    rewards = [r.reward for r in results if r.success and r.reward is not None]
    if rewards:
        line += f"; mean reward {sum(rewards) / len(rewards):.3f} over {len(rewards)} completed"
    if stop is not None:
        line += f"; stopped after {counts.total} of {selected} rows"
    line += end.backend_note
    document = {
        "summary": {
            "total": counts.total,
            "passed": counts.completed,
            "failed": counts.failed,
            "total_duration_ms": round(duration, 3),
            "total_tokens": tokens,
            "retried_calls": retries,
            "outcomes": counts.to_dict(),
            "stopped_early": stop is not None,
            "stop_reason": stop,
        },
        "results": [{**r.record(), "final_messages": r.attempt.final_messages} for r in results],
        "model": args.model,
        "run": run_member(args),
    }
    source = str(output or "osmosis test")
    figures = show_summary(args, document, source)
    say(line, quiet=args.json)
    if output is not None:
        _write_json(output, document)
        say(quiet=args.quiet, line=f"Results written to: {output}")
    if trajectories is not None:
        say(
            quiet=args.quiet,
            line=f"Trajectories written to: {args.trajectories} ({trajectories.count} ATIF files)",
        )
    finish_run(args, document, source, figures, extra={"concurrency": limit_summary(end.limit)}, end=end)
    if stop is not None:
        raise CLIError(f"the run stopped: {stop}")
    reason = verdict(
        counts, max_failure_rate=args.max_failure_rate, unit="row", limit_name="--max-failure-rate"
    )
    if reason is not None:
        raise CLIError(reason)
    return 0


async def _interactive(args: argparse.Namespace, plan: RunPlan) -> int:
    from osmosis_ai.cli.interactive import InteractiveSession
    from osmosis_ai.runs.executors.local import InProcessAgent
    from osmosis_ai.runs.items import PRIMARY
    from osmosis_ai.runs.run import open_rows

    assert isinstance(plan.executor, InProcessAgent)
    _, total, selected = open_rows(plan)
    reader = plan.executor.read_rows(plan.rows)
    last = args.offset + selected - 1
    if args.row is not None and not args.offset <= args.row <= last:
        valid = f"{args.offset}-{last}" if last > args.offset else str(last)
        raise CLIError(f"--row {args.row} is out of range; valid rows are {valid}")
    prepared = plan.executor.prepare(plan)
    say(quiet=args.quiet, line=f"Dataset: {reader.file_path} ({total} rows, running {selected})")
    async with prepared.session(plan, [PRIMARY], None) as opened:
        client = opened.clients[PRIMARY]
        at = f" at {args.base_url}" if args.base_url else ""
        say(quiet=args.quiet, line=f"Model: {client.display_name}{at}")
        await client.preflight_check()  # a bad key or model: one line, nothing run
        session = InteractiveSession(client, reader, args.offset, last)
        async with opened.replacing(PRIMARY, session.client).pipeline(1) as steps:
            results = await session.run(steps, args.row)
    trajectories = trajectory_writer(args, command="test")
    if trajectories is not None:
        for result in results:
            trajectories.write_result(result, model=args.model)
    counts = OutcomeCounts.of(r.outcome for r in results)
    line = counts.describe("row")
    if session.aborted_rows:
        line += f"; {session.aborted_rows} aborted"
    print(line, flush=True)
    reason = verdict(
        counts, max_failure_rate=args.max_failure_rate, unit="row", limit_name="--max-failure-rate"
    )
    if reason is not None:
        raise CLIError(reason)
    return 0


def _write_json(path: Path, document: Any) -> None:
    from osmosis_ai.cli.output_file import write_output

    write_output(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", flag="--output")
