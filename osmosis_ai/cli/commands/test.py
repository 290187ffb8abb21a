"""``osmosis test``: run an agent loop in-process over a dataset, its model calls answered by LiteLLM.

Cheap local checks come first — the agent import, the dataset (opened, counted and its first row
checked, not loaded) — then one tiny preflight request to the model, and only then the rows: one after
another by default, ``--concurrency N`` (or ``auto``, following the model server) at once. Each row
prints one line with its outcome (the ``-o`` file keeps row order); the summary counts the outcomes beside the pass rate, and its last
line is printed with ``-q`` too. Exit status by the shared rule
(:func:`osmosis_ai.evaluation.outcome.verdict`): 0 when every row completed (or the failures stay
within ``--max-failure-rate``), 1 with the reason otherwise; a systemic provider failure stops the
run at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Mapping
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
    open_dataset,
    run_limit,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import progress_bar, say, setup_logging, wants_progress
from osmosis_ai.cli.running import INTERRUPTED, run_command
from osmosis_ai.cli.summary import add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.consts import PACKAGE_VERSION
from osmosis_ai.evaluation.outcome import OutcomeCounts, verdict

if TYPE_CHECKING:
    from osmosis_ai.runs.engine import Pipeline

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
    setup_logging(logging.DEBUG if args.debug else None)
    args.quiet = args.quiet or args.json
    return run_command(lambda: _test(args), on_interrupt=_interrupted)


def _interrupted() -> int:
    print("Interrupted.", file=sys.stderr)
    return INTERRUPTED


async def _test(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.backend import run_backend, worker_settings
    from osmosis_ai.cli.eval.report import run_member
    from osmosis_ai.cli.loading import load_agent
    from osmosis_ai.evaluation.llm_client import ExternalLLMClient
    from osmosis_ai.models.concurrency import AdaptiveLimit, observer_of
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.items import work_items
    from osmosis_ai.runs.result import Result

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
    limit = run_limit(args.concurrency, args, base_url=args.base_url)
    if args.backend == "ray" and isinstance(limit, AdaptiveLimit):
        raise CLIError(
            "--concurrency auto follows one process's model calls; give --concurrency N with --backend ray"
        )
    client = ExternalLLMClient(
        args.model, api_key=args.api_key, api_base=args.base_url, observer=observer_of(limit)
    )
    async with client:
        say(
            quiet=args.quiet,
            line=f"Model: {client.display_name}" + (f" at {args.base_url}" if args.base_url else ""),
        )
        if args.interactive:
            await client.preflight_check()  # a bad key or model: one line, nothing run
            return await _interactive(args, agent_loop, client, reader, last)
        results: list[Result] = []
        # On a terminal a bar counts the rows and only failed rows get a line; piped, every row does.
        bar = not args.quiet and wants_progress(None, selected, sys.stdout)

        def show(result: Result) -> None:
            results.append(result)
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

        backend_context = run_backend(
            args, lambda: contextlib.nullcontext(_pipeline(args, agent_loop, client, threads=limit.ceiling)),
            factory=f"{__name__}:ray_worker", settings=worker_settings(args), concurrency=limit.ceiling,
        )  # fmt: skip
        async with backend_context as backend:  # entered first: Ray's workers start during the preflight
            await client.preflight_check()  # a bad key or model: one line, nothing run
            process = await backend.ready()
            if header := backend.header():
                say(header, quiet=args.quiet)
            with progress_bar(selected, "rows", enabled=bar, stderr=False) as advance:
                try:
                    report = await run_items(
                        work_items(reader.iter_indexed(args.limit, args.offset)),
                        process,
                        concurrency=limit,
                        on_result=show,
                    )
                finally:
                    if isinstance(limit, AdaptiveLimit):
                        await limit.aclose()  # its server-metrics reader
            note = backend.note()
    results.sort(key=lambda r: r.item.row_index)
    if (concurrency := limit_line(limit)) is not None:
        say(quiet=args.quiet, line=concurrency)
    stop = report.stop_reason
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
    line += note
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
        "results": [r.record() for r in results],
        "model": args.model,
        "run": run_member(args),
    }
    source = str(output or "osmosis test")
    figures = show_summary(args, document, source)
    say(line, quiet=args.json)
    if output is not None:
        _write_json(output, document)
        say(quiet=args.quiet, line=f"Results written to: {output}")
    finish_run(args, document, source, figures, extra={"concurrency": limit_summary(limit)})
    if stop is not None:
        raise CLIError(f"the run stopped: {stop}")
    reason = verdict(
        counts, max_failure_rate=args.max_failure_rate, unit="row", limit_name="--max-failure-rate"
    )
    if reason is not None:
        raise CLIError(reason)
    return 0


@contextlib.asynccontextmanager
async def ray_worker(settings: Mapping[str, Any], share: int) -> AsyncIterator[Pipeline]:
    """One Ray worker's pipeline for ``osmosis test --backend ray``: the same agent and model as in
    one process, named by the command's arguments (``settings``), ``share`` rows in flight."""
    from osmosis_ai.cli.loading import load_agent
    from osmosis_ai.evaluation.llm_client import ExternalLLMClient

    args = argparse.Namespace(**settings)
    async with ExternalLLMClient(args.model, api_key=args.api_key, api_base=args.base_url) as client:
        yield _pipeline(args, load_agent(args), client, threads=share)


def _pipeline(args: argparse.Namespace, agent_loop: Any, client: Any, *, threads: int = 1) -> Pipeline:
    """The agent in-process with ``client`` answering its model calls, scored by the agent's own reward;
    synchronous agent code gets ``threads`` threads of its own (one per row in flight)."""
    from osmosis_ai._usercode import UserThreads
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.local import InProcessExecutor, LocalModel
    from osmosis_ai.runs.items import PRIMARY
    from osmosis_ai.runs.scorer import Scorer

    params = {
        k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None
    }
    model = LocalModel(client, "test", {"execution_mode": "test", "test_mode": True})
    executor = InProcessExecutor(
        agent_loop,
        {PRIMARY: model},
        max_turns=args.max_turns,
        completion_params=params,
        debug_dir=DEBUG_DIR if args.debug else None,
        threads=UserThreads(threads, name="osmosis-test"),
    )
    return Pipeline(executor, Scorer(), timeout=args.timeout)


async def _interactive(args: argparse.Namespace, agent_loop: Any, client: Any, reader: Any, last: int) -> int:
    from osmosis_ai.cli.interactive import InteractiveSession

    session = InteractiveSession(client, reader, args.offset, last)
    results = await session.run(_pipeline(args, agent_loop, session.client), args.row)
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
