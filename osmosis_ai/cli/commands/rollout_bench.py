"""``osmosis rollout bench``: rollouts/s of a rollout server, its model calls answered at once by a
canned policy (:func:`osmosis_ai.runs.bench.run_bench`), so only the server and the protocol cost."""

from __future__ import annotations

import argparse
from typing import Any

from osmosis_ai.cli import output
from osmosis_ai.cli.arguments import whole_number
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.rollout_target import add_target_arguments, rollout_server


def add_parser(sub: Any) -> None:
    bench = sub.add_parser(
        "bench",
        help="measure rollouts/s of a rollout server with an instant canned policy",
        description="Measure rollouts/s of a rollout server with an instant canned policy.",
    )
    add_target_arguments(bench)
    bench.add_argument("--rollouts", type=whole_number(1), default=200, help="rollouts to run (default 200)")
    bench.add_argument("--tool-turns", type=int, default=1, help="tool-calling turns per rollout (default 1)")
    bench.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    bench.set_defaults(timeout=120.0)


async def bench(args: argparse.Namespace) -> int:
    """Measure rollouts/s of the server with an instant canned policy; print the figures."""
    from osmosis_ai.runs.bench import run_bench

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
        output.print_json(figures)
    else:
        print(
            f"{summary.rollouts} rollouts, concurrency {args.concurrency}, {args.tool_turns} tool turn(s): "
            f"{figures['rollouts_per_s']} rollouts/s; latency p50 {figures['p50_ms']} ms, "
            f"p90 {figures['p90_ms']} ms, p99 {figures['p99_ms']} ms; statuses {summary.statuses}"
        )
    if not summary.all_terminal:
        raise CLIError("some rollouts did not finish: " + "; ".join(summary.infra_failures))
    return 0
