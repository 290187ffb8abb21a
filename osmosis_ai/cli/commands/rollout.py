"""``osmosis rollout run`` and ``osmosis rollout bench``: drive a rollout server with a local TrainGate.

``run`` sends every dataset row (``--n`` times) through the rollout server — the agent served
in-process with ``-m module:attr``, or an existing server with ``--url`` — answers the agent's LLM
calls with the chosen policy, checks the protocol, and prints a summary (``--output`` keeps one
JSON record per rollout; runs of at most 20 rollouts also get a table with one row per rollout).
``bench`` measures rollouts/s with an instant canned policy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from osmosis_ai.cli.arguments import finite_number, whole_number
from osmosis_ai.errors import CLIError

SERVER_KEY_ENV = "OSMOSIS_SERVER_API_KEY"
PER_ROLLOUT_TABLE_LIMIT = 20  # larger runs get the summary only; --output has every rollout


def _add_target(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "-m",
        "--module",
        metavar="MODULE:ATTR",
        help="agent loop to serve in-process, e.g. examples.calculator.agent:agent_loop",
    )
    target.add_argument("--url", help="base URL of a running rollout server, e.g. http://127.0.0.1:9000")
    parser.add_argument(
        "--server-api-key", metavar="KEY", help=f"Bearer key of the --url server (default: ${SERVER_KEY_ENV})"
    )
    parser.add_argument(
        "--concurrency", type=whole_number(1), default=8, help="rollouts in flight (default 8)"
    )
    parser.add_argument(
        "--timeout",
        type=finite_number(0, exclusive=True),
        default=300.0,
        help="seconds each rollout may take before it counts as lost (default 300)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show library log messages")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rollout_command", metavar="{run,bench}", required=True)
    run = sub.add_parser(
        "run",
        help="run a dataset through a rollout server with a local TrainGate",
        description="Run a dataset through a rollout server with a local TrainGate.",
    )
    _add_target(run)
    run.add_argument(
        "-d",
        "--dataset",
        required=True,
        help="dataset file (.jsonl, .csv, .parquet) with system_prompt, user_prompt, ground_truth",
    )
    run.add_argument(
        "--model",
        required=True,
        help="policy: a LiteLLM model (e.g. openai/gpt-4o-mini), a model behind --base-url, "
        "or 'scripted' (offline calculator solver for demos)",
    )
    run.add_argument("--base-url", help="OpenAI-compatible base URL of the policy (vLLM, SGLang, Ollama)")
    run.add_argument("--api-key", help="API key of the policy backend (default: the provider's env variable)")
    run.add_argument(
        "--tokenizer",
        metavar="TOKENIZER_JSON",
        help="HuggingFace tokenizer.json for token ids the backend does not return (default: bytes)",
    )
    run.add_argument("--n", type=whole_number(1), default=1, help="rollouts per dataset row (default 1)")
    run.add_argument(
        "--max-turns", type=whole_number(1), default=10, help="max_turns sent to the agent (default 10)"
    )
    run.add_argument(
        "--temperature", type=finite_number(), help="completion_params.temperature sent to the agent"
    )
    run.add_argument(
        "--max-tokens", type=whole_number(1), help="completion_params.max_tokens sent to the agent"
    )
    run.add_argument(
        "--reward",
        metavar="MODULE:FN",
        help="compute the reward trainer-side with fn(solution_str, ground_truth, extra_info)",
    )
    run.add_argument(
        "--gateway-host",
        default="127.0.0.1",
        help="address the TrainGate binds and advertises as server_url (default 127.0.0.1; "
        "give this machine's reachable IP when --url points at another host)",
    )
    run.add_argument("-o", "--output", metavar="FILE.jsonl", help="write one JSON record per rollout")
    run.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not on a terminal"
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary table")

    bench = sub.add_parser(
        "bench",
        help="measure rollouts/s of a rollout server with an instant canned policy",
        description="Measure rollouts/s of a rollout server with an instant canned policy.",
    )
    _add_target(bench)
    bench.add_argument("--rollouts", type=whole_number(1), default=200, help="rollouts to run (default 200)")
    bench.add_argument("--tool-turns", type=int, default=1, help="tool-calling turns per rollout (default 1)")
    bench.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    bench.set_defaults(timeout=120.0)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:
        # Agent failures are reported per rollout in the summary; their tracebacks only with --verbose.
        logging.getLogger("osmosis_ai.rollout").setLevel(logging.CRITICAL)
    if args.rollout_command == "bench":
        return asyncio.run(_bench(args))
    return asyncio.run(_run(args))


@contextlib.asynccontextmanager
async def rollout_server(args: argparse.Namespace) -> AsyncIterator[tuple[str, str | None]]:
    """Yield (base URL, Bearer key) of the rollout server to drive: in-process for ``-m``, else ``--url``."""
    if args.url:
        yield args.url, args.server_api_key or os.environ.get(SERVER_KEY_ENV) or None
        return
    from osmosis_ai.rollout.cli_utils import load_agent_loop
    from osmosis_ai.traingate.local_server import serve_agent_loop_locally

    agent_loop = load_agent_loop(args.module)
    async with serve_agent_loop_locally(agent_loop) as url:
        yield url, None


def _progress(
    enabled: bool, total: int
) -> tuple[contextlib.AbstractContextManager[Any], Callable[[Any], None]]:
    if not enabled:
        return contextlib.nullcontext(), lambda _session: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("rollouts"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(),
        transient=True,
    )
    task = progress.add_task("rollouts", total=total)
    return progress, lambda _session: progress.advance(task)


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=False)


def _prepare(args: argparse.Namespace) -> tuple[list[dict[str, Any]], Any, Any, Any]:
    """Load everything the run needs before any server starts: rows, reward, tokenizer, policy."""
    from osmosis_ai.traingate.dataset import load_dataset
    from osmosis_ai.traingate.errors import TrainGateError
    from osmosis_ai.traingate.policy import make_policy
    from osmosis_ai.traingate.reward import load_reward
    from osmosis_ai.traingate.tokenizer import load_tokenizer

    if args.output and not Path(args.output).resolve().parent.is_dir():
        raise CLIError(f"cannot write --output {args.output}: its directory does not exist")
    try:
        rows = load_dataset(args.dataset)
        reward_fn = load_reward(args.reward) if args.reward else None
        tokenizer = load_tokenizer(args.tokenizer)
        policy = make_policy(args.model, base_url=args.base_url, api_key=args.api_key)
    except TrainGateError as exc:
        raise CLIError(str(exc)) from exc
    return rows, reward_fn, tokenizer, policy


async def _run(args: argparse.Namespace) -> int:
    from osmosis_ai.traingate.gateway import TrainGate
    from osmosis_ai.traingate.report import RecordWriter, render_rollouts, render_summary, summarize
    from osmosis_ai.traingate.runner import RunConfig, run_rollouts

    rows, reward_fn, tokenizer, policy = _prepare(args)
    params = {
        k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None
    }
    show_progress = not args.quiet and (args.progress or sys.stdout.isatty())
    progress, advance = _progress(show_progress, len(rows) * args.n)
    writer = RecordWriter(args.output) if args.output else None

    async def finished(session: Any) -> None:
        if writer is not None:
            # Written as each rollout ends (an interrupted run keeps what it did), by a writer thread.
            await writer.write(session)
        session.release_turns()
        advance(session)

    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(policy.aclose)
        if writer is not None:
            try:
                stack.enter_context(writer)
            except OSError as exc:
                raise CLIError(f"cannot write --output {args.output}: {exc}") from exc
        # The gateway outlives the rollout server, so late callbacks sent while it shuts down are still heard.
        gate = await stack.enter_async_context(TrainGate(policy, tokenizer=tokenizer, host=args.gateway_host))
        url, key = await stack.enter_async_context(rollout_server(args))
        config = RunConfig(
            server_url=url,
            server_api_key=key,
            n=args.n,
            concurrency=args.concurrency,
            timeout=args.timeout,
            max_turns=args.max_turns,
            completion_params=params,
            reward_fn=reward_fn,
        )
        started = time.perf_counter()
        with progress:
            sessions = await run_rollouts(gate, rows, config, on_done=finished)
        wall = time.perf_counter() - started
    summary = summarize(sessions, wall)
    if not args.quiet:
        if len(sessions) <= PER_ROLLOUT_TABLE_LIMIT:
            render_rollouts(sessions, _console())
        render_summary(summary, sessions, _console())
        if writer is not None:
            print(f"wrote {writer.count} record(s) to {args.output}")
    if not summary.all_terminal:
        lost = summary.rollouts - sum(summary.statuses.get(s, 0) for s in ("COMPLETED", "ERROR"))
        raise CLIError(
            f"{lost} of {summary.rollouts} rollout(s) did not finish: " + "; ".join(summary.infra_failures)
        )
    return 0


async def _bench(args: argparse.Namespace) -> int:
    import json

    from osmosis_ai.traingate.bench import run_bench

    async with rollout_server(args) as (url, key):
        summary = await run_bench(
            url,
            rollouts=args.rollouts,
            concurrency=args.concurrency,
            tool_turns=args.tool_turns,
            timeout=args.timeout,
            server_api_key=key,
        )
    lat = summary.latency_ms
    figures = {
        "rollouts": summary.rollouts,
        "concurrency": args.concurrency,
        "tool_turns": args.tool_turns,
        "statuses": summary.statuses,
        "wall_s": round(summary.wall_s, 3),
        "rollouts_per_s": round(summary.rollouts_per_s, 1),
        **{f"{name}_ms": None if value is None else round(value, 2) for name, value in lat.items()},
        "append_only_violations": summary.violations,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{summary.rollouts} rollouts, concurrency {args.concurrency}, {args.tool_turns} tool turn(s): "
            f"{figures['rollouts_per_s']} rollouts/s; latency p50 {figures['p50_ms']} ms, "
            f"p90 {figures['p90_ms']} ms, p99 {figures['p99_ms']} ms; statuses {summary.statuses}"
        )
    if not summary.all_terminal:
        raise CLIError("some rollouts did not finish: " + "; ".join(summary.infra_failures))
    return 0
