"""``osmosis rollout run`` and ``osmosis rollout bench``: drive a rollout server with a local TrainGate.

``run`` sends every dataset row (``--n`` times) through the rollout server — the agent served
in-process with ``-m module:attr``, or an existing server with ``--url`` — answers the agent's LLM
calls with the chosen policy, checks the protocol, and prints a summary (``--output`` keeps one
JSON record per rollout; runs of at most 20 rollouts also get a table with one row per rollout).
Everything local is checked first (dataset, reward, tokenizer, agent), then the policy answers one
tiny preflight request, and only then does any rollout start. The last line on stdout counts the
outcomes (printed with ``--quiet`` too); the exit status follows the shared rule of
:func:`osmosis_ai.evaluation.outcome.verdict`, with the reason on stderr.
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
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli import output
from osmosis_ai.cli.arguments import finite_number, fraction, whole_number
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import setup_logging
from osmosis_ai.cli.summary import add_summary_arguments, finish_run

if TYPE_CHECKING:
    from rich.console import Console

    from osmosis_ai.traingate.report import RunSummary
    from osmosis_ai.traingate.session import RolloutSession

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
    run.add_argument(
        "--max-failure-rate",
        type=fraction,
        default=0.0,
        metavar="FRACTION",
        help="share of rollouts (0-1) that may fail without failing the run (default 0: every rollout "
        "must complete); infrastructure failures and timeouts always fail it",
    )
    run.add_argument("-o", "--output", metavar="FILE.jsonl", help="write one JSON record per rollout")
    add_summary_arguments(run)
    run.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not on a terminal"
    )
    run.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no tables: only the outcome line"
    )

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
    setup_logging(logging.INFO if args.verbose else None)
    if args.rollout_command == "bench":
        return asyncio.run(_bench(args))
    return asyncio.run(_run(args))


@contextlib.asynccontextmanager
async def rollout_server(
    args: argparse.Namespace, agent_loop: Any = None
) -> AsyncIterator[tuple[str, str | None]]:
    """Yield (base URL, Bearer key) of the rollout server to drive: in-process for ``-m``, else ``--url``.

    ``agent_loop`` is the already loaded ``-m`` agent, if the caller loaded it.
    """
    if args.url:
        yield args.url, args.server_api_key or os.environ.get(SERVER_KEY_ENV) or None
        return
    from osmosis_ai.cli.loading import load_agent_loop
    from osmosis_ai.traingate.local_server import serve_agent_loop_locally

    if agent_loop is None:
        agent_loop = load_agent_loop(args.module)
    async with serve_agent_loop_locally(agent_loop) as url:
        yield url, None


def _prepare(args: argparse.Namespace) -> tuple[list[dict[str, Any]], Any, Any, Any, Any]:
    """Load everything the run needs before any server starts: rows, reward, tokenizer, agent, policy."""
    from osmosis_ai.cli.loading import load_agent_loop, load_reward
    from osmosis_ai.traingate.dataset import load_dataset
    from osmosis_ai.traingate.policy import make_policy
    from osmosis_ai.traingate.tokenizer import load_tokenizer

    if args.output and not Path(args.output).resolve().parent.is_dir():
        raise CLIError(f"cannot write --output {args.output}: its directory does not exist")
    rows = load_dataset(args.dataset)
    reward_fn = load_reward(args.reward) if args.reward else None
    tokenizer = load_tokenizer(args.tokenizer)
    agent_loop = load_agent_loop(args.module) if args.module else None
    policy = make_policy(args.model, base_url=args.base_url, api_key=args.api_key)
    return rows, reward_fn, tokenizer, agent_loop, policy


async def _run(args: argparse.Namespace) -> int:
    from osmosis_ai.traingate.gateway import TrainGate
    from osmosis_ai.traingate.report import RecordWriter, summarize
    from osmosis_ai.traingate.runner import RunConfig, run_rollouts

    rows, reward_fn, tokenizer, agent_loop, policy = _prepare(args)
    args.quiet = args.quiet or args.json
    params = {
        k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None
    }
    show_progress = not args.quiet and (args.progress or sys.stdout.isatty())
    progress = output.progress_bar(len(rows) * args.n, "rollouts", enabled=show_progress, stderr=False)
    writer = RecordWriter(args.output) if args.output else None

    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(policy.aclose)
        await policy.preflight()  # a bad key or model: one line and nothing run
        if writer is not None:
            try:
                stack.enter_context(writer)
            except OSError as exc:
                raise CLIError(f"cannot write --output {args.output}: {exc}") from exc
        # The gateway outlives the rollout server, so late callbacks sent while it shuts down are still heard.
        gate = await stack.enter_async_context(TrainGate(policy, tokenizer=tokenizer, host=args.gateway_host))
        url, key = await stack.enter_async_context(rollout_server(args, agent_loop))
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
        with progress as advance:

            async def finished(session: Any) -> None:
                if writer is not None:
                    # Written as each rollout ends (an interrupted run keeps what it did), by a writer thread.
                    await writer.write(session)
                session.release_turns()
                advance()

            sessions = await run_rollouts(gate, rows, config, on_done=finished)
        wall = time.perf_counter() - started
    summary = summarize(sessions, wall)
    if not args.quiet:
        console = output.rich_console()
        if len(sessions) <= PER_ROLLOUT_TABLE_LIMIT:
            render_rollouts(sessions, console)
        render_summary(summary, sessions, console)
        if writer is not None:
            print(f"wrote {writer.count} record(s) to {args.output}")
    output.say(outcome_line(summary), quiet=args.json)
    # The records file has every turn; without one, the records in memory (their turns already released).
    finish_run(args, args.output or [s.to_record() for s in sessions], "osmosis rollout run")
    if not summary.all_terminal:
        lost = summary.rollouts - sum(summary.statuses.get(s, 0) for s in ("COMPLETED", "ERROR"))
        raise CLIError(
            f"{lost} of {summary.rollouts} rollout(s) did not finish: " + "; ".join(summary.infra_failures)
        )
    from osmosis_ai.evaluation.outcome import verdict

    reason = verdict(
        summary.outcome_counts,
        max_failure_rate=args.max_failure_rate,
        unit="rollout",
        limit_name="--max-failure-rate",
    )
    if reason is not None:
        raise CLIError(reason + _first_failure(sessions))
    return 0


def outcome_line(summary: RunSummary) -> str:
    """The one line every run prints: outcome counts beside the pass rate, and the mean reward."""
    line = summary.outcome_counts.describe("rollout")
    if summary.mean_reward is not None:
        line += f"; mean reward {summary.mean_reward:.3f} over {summary.rewarded} completed"
    return line


def _first_failure(sessions: Sequence[RolloutSession]) -> str:
    """``"; first: <rollout id>: <why>"`` for the first failed rollout, to start the diagnosis."""
    from osmosis_ai.evaluation.outcome import Outcome

    for session in sessions:
        outcome = session.outcome
        if outcome is Outcome.COMPLETED:
            continue
        why = session.reward_error or session.error_message or (session.errors[-1] if session.errors else "")
        if outcome is Outcome.NO_MODEL_CALLS:
            why = "the agent finished without calling the model"
        why = " ".join(str(why).split())
        return f"; first: {session.rollout_id} ({outcome.value}): {why[:200]}" if why else ""
    return ""


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


# -- the console report ------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _last_content(messages: Sequence[dict[str, Any]], role: str) -> str:
    content = next((m.get("content") for m in reversed(messages) if m.get("role") == role), None)
    return " ".join(str(content or "").split())


def render_rollouts(sessions: Sequence[RolloutSession], console: Console) -> None:
    """Print one row per rollout: status, reward, turns, token counts and the final answer."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Rollouts (tokens: generated / whole trajectory)", title_justify="left")
    table.add_column("row", justify="right")
    table.add_column("status", min_width=9)
    table.add_column("reward", justify="right", min_width=6)
    table.add_column("turns", justify="right", min_width=5)
    table.add_column("tokens", justify="right", min_width=9)
    table.add_column("final answer", overflow="ellipsis", no_wrap=True, max_width=26)
    for session in sorted(sessions, key=lambda s: (s.row_index, s.sample_index)):
        reward = "-" if session.reward is None else f"{session.reward:.3f}"
        table.add_row(
            str(session.row_index),
            session.status,
            reward,
            str(session.num_turns),
            f"{session.completion_tokens}/{session.context_tokens}",
            escape(_last_content(session.final_messages, "assistant")),
        )
    console.print(table)


def render_summary(summary: RunSummary, sessions: Sequence[RolloutSession], console: Console) -> None:
    """Print the run's summary table, then the first append-only violations and agent errors.

    Infrastructure failures are left to the caller, which turns them into the command's error."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Rollout run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    statuses = ", ".join(f"{name} {count}" for name, count in sorted(summary.statuses.items()))
    table.add_row("rollouts", f"{summary.rollouts} ({statuses})")
    counts = summary.outcome_counts
    failures = counts.failures()
    table.add_row(
        "outcomes",
        f"{counts.completed} completed" + (f"; {failures}" if failures else ""),
        style="yellow" if failures else None,
    )
    reward = (
        "-" if summary.mean_reward is None else f"{summary.mean_reward:.3f} over {summary.rewarded} completed"
    )
    table.add_row("mean reward", reward)
    table.add_row("mean turns", f"{summary.mean_turns:.2f}")
    lat = summary.latency_ms
    table.add_row("latency p50 / p90 / p99", f"{_ms(lat['p50'])} / {_ms(lat['p90'])} / {_ms(lat['p99'])}")
    table.add_row("throughput", f"{summary.rollouts_per_s:.1f} rollouts/s ({summary.wall_s:.2f} s wall)")
    violations = f"{summary.violations} in {summary.rollouts_with_violations} rollout(s)"
    table.add_row("append-only violations", violations, style="red" if summary.violations else None)
    if summary.rejected_calls or summary.gateway_errors:
        table.add_row(
            "refused calls / gateway errors",
            f"{summary.rejected_calls} / {summary.gateway_errors}",
            style="yellow",
        )
    first_error = next((e for s in sessions for e in s.errors), None)
    if first_error:
        table.add_row("first gateway error", escape(first_error), style="yellow")
    if summary.reward_errors:
        first = next(s.reward_error for s in sessions if s.reward_error)
        table.add_row(
            "reward errors", f"{summary.reward_errors} (first: {escape(first or '')})", style="yellow"
        )
    console.print(table)
    shown = 0
    for session in sessions:
        for violation in session.violations:
            if shown < 5:
                console.print(
                    f"[red]append-only[/red] {escape(session.rollout_id)}: {escape(violation.describe())}"
                )
            shown += 1
    if shown > 5:
        console.print(f"... and {shown - 5} more append-only violation(s); see --output for all of them")
    errors = [s for s in sessions if s.status == "ERROR"]
    for session in errors[:3]:
        message = escape(session.error_message or "(no error message)")
        console.print(
            f"[yellow]agent error[/yellow] {escape(session.rollout_id)}: {message}", highlight=False
        )
    if len(errors) > 3:
        console.print(f"... and {len(errors) - 3} more rollout(s) ended in ERROR; see --output")
    if errors:
        console.print("(agent tracebacks are logged with --verbose)")
