"""``osmosis test``: run an agent loop in-process over a dataset, its model calls answered by LiteLLM.

Cheap local checks come first — the agent import, the dataset (opened, counted and its first row
checked, not loaded) — then one tiny preflight request to the model, and only then the rows, one after another. Each row
prints one line with its outcome; the summary counts the outcomes beside the pass rate, and its last
line is printed with ``-q`` too. Exit status by the shared rule
(:func:`osmosis_ai.evaluation.outcome.verdict`): 0 when every row completed (or the failures stay
within ``--max-failure-rate``), 1 with the reason otherwise; a systemic provider failure stops the
run at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from osmosis_ai.cli.arguments import add_agent_run_arguments, open_dataset, whole_number
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import progress_bar, say, setup_logging, wants_progress
from osmosis_ai.cli.summary import add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.consts import PACKAGE_VERSION

ERROR_PREVIEW = 200
DEBUG_DIR = "test_debug"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_agent_run_arguments(parser, unit="row")
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
    setup_logging(logging.DEBUG if args.debug else None)
    args.quiet = args.quiet or args.json
    return asyncio.run(_test(args))


async def _test(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.loading import load_agent
    from osmosis_ai.evaluation.llm_client import ExternalLLMClient
    from osmosis_ai.evaluation.outcome import verdict
    from osmosis_ai.evaluation.runner import LocalRunner, RowResult

    output = Path(args.output) if args.output else None
    check_run_outputs(args)
    mode = " (Interactive Mode)" if args.interactive else ""
    say(quiet=args.quiet, line=f"osmosis-rollout-test v{PACKAGE_VERSION}{mode}")
    agent_loop = load_agent(args)
    reader, total, selected = open_dataset(args)
    last = args.offset + selected - 1
    if args.row is not None and not args.offset <= args.row <= last:
        valid = f"{args.offset}-{last}" if last > args.offset else str(last)
        raise CLIError(f"--row {args.row} is out of range; valid rows are {valid}")
    say(quiet=args.quiet, line=f"Dataset: {reader.file_path} ({total} rows, running {selected})")
    client = ExternalLLMClient(args.model, api_key=args.api_key, api_base=args.base_url)
    params = {
        k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None
    }
    async with client:
        say(
            quiet=args.quiet,
            line=f"Model: {client.display_name}" + (f" at {args.base_url}" if args.base_url else ""),
        )
        await client.preflight_check()  # a bad key or model: one line, nothing run
        if args.interactive:
            return await _interactive(args, agent_loop, client, reader, last, params)
        runner = LocalRunner(
            agent_loop,
            client,
            rollout_id_prefix="test",
            request_metadata={"execution_mode": "test", "test_mode": True},
            max_turns=args.max_turns,
            completion_params=params,
            debug_dir=DEBUG_DIR if args.debug else None,
        )
        done = 0
        # On a terminal a bar counts the rows and only failed rows get a line; piped, every row does.
        bar = not args.quiet and wants_progress(None, selected, sys.stdout)

        def show(result: RowResult) -> None:
            nonlocal done
            done += 1
            advance()
            if bar and result.success:
                return
            status = "OK" if result.success else f"FAILED [{result.outcome.value}]"
            line = (
                f"[{done}/{selected}] Row {result.row_index}: {status} "
                f"({format_duration(result.duration_ms)}, {result.tokens:,} tokens)"
            )
            if result.error and not result.success:
                error = " ".join(result.error.split())
                line += " - " + (error if len(error) <= ERROR_PREVIEW else error[: ERROR_PREVIEW - 3] + "...")
            say(quiet=args.quiet, line=line)

        with progress_bar(selected, "rows", enabled=bar, stderr=False) as advance:
            batch = await runner.run(reader.iter_indexed(args.limit, args.offset), on_result=show)
    counts = batch.counts
    say(quiet=args.quiet, line="")
    say(quiet=args.quiet, line="Summary:")
    say(quiet=args.quiet, line=f"  Duration: {format_duration(batch.total_duration_ms)}")
    say(quiet=args.quiet, line=f"  Total tokens: {batch.total_tokens:,}")
    if batch.total_retries:
        say(
            quiet=args.quiet,
            line=f"  Retried model calls: {batch.total_retries} (transient provider failures)",
        )
    if batch.stopped_early:
        say(quiet=args.quiet, line=f"  Stopped early: {batch.stop_reason}")
    line = counts.describe("row")
    rewards = [r.reward for r in batch.results if r.success and r.reward is not None]
    if rewards:
        line += f"; mean reward {sum(rewards) / len(rewards):.3f} over {len(rewards)} completed"
    if batch.stopped_early:
        line += f"; stopped after {counts.total} of {selected} rows"
    document, source = batch.to_dict(), str(output or "osmosis test")
    figures = show_summary(args, document, source)
    say(line, quiet=args.json)
    if output is not None:
        _write_json(output, document)
        say(quiet=args.quiet, line=f"Wrote results to {output}")
    finish_run(args, document, source, figures)
    if batch.stopped_early:
        raise CLIError(f"the run stopped: {batch.stop_reason}")
    reason = verdict(
        counts, max_failure_rate=args.max_failure_rate, unit="row", limit_name="--max-failure-rate"
    )
    if reason is not None:
        raise CLIError(reason)
    return 0


async def _interactive(
    args: argparse.Namespace,
    agent_loop: Any,
    client: Any,
    reader: Any,
    last: int,
    params: dict[str, Any],
) -> int:
    from osmosis_ai.cli.interactive import InteractiveSession
    from osmosis_ai.evaluation.outcome import OutcomeCounts, verdict
    from osmosis_ai.evaluation.runner import LocalRunner

    session = InteractiveSession(client, reader, args.offset, last)
    runner = LocalRunner(
        agent_loop,
        session.client,
        rollout_id_prefix="test",
        request_metadata={"execution_mode": "test", "test_mode": True},
        max_turns=args.max_turns,
        completion_params=params,
        debug_dir=DEBUG_DIR if args.debug else None,
    )
    results = await session.run(runner, args.row)
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
