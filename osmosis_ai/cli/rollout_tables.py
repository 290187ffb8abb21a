"""What ``osmosis rollout run`` prints at its end: one row per rollout (short runs), and what only a
rollout run measures — statuses, turns, throughput, the protocol checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from osmosis_ai.traingate.report import RolloutLine, RunSummary, RunTally


def render_rollouts(lines: Sequence[RolloutLine], console: Console, *, samples: bool) -> None:
    """Print one row per rollout: its row (and with ``samples``, its sample), status, reward, turns,
    token counts and the final answer."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Rollouts (tokens: generated / whole trajectory)", title_justify="left")
    table.add_column("row", justify="right")
    if samples:
        table.add_column("sample", justify="right")
    table.add_column("status", min_width=9)
    table.add_column("reward", justify="right", min_width=6)
    table.add_column("turns", justify="right", min_width=5)
    table.add_column("tokens", justify="right", min_width=9)
    table.add_column("final answer", overflow="ellipsis", no_wrap=True, max_width=26)
    for line in sorted(lines, key=lambda line: (line.row_index, line.sample_index)):
        reward = "-" if line.reward is None else f"{line.reward:.3f}"
        table.add_row(
            str(line.row_index),
            *([str(line.sample_index)] if samples else []),
            line.status,
            reward,
            str(line.num_turns),
            f"{line.completion_tokens}/{line.context_tokens}",
            escape(line.answer),
        )
    console.print(table)


def render_summary(summary: RunSummary, tally: RunTally, console: Console) -> None:
    """Print what only a rollout run measures (statuses, turns, throughput, protocol checks), then
    the first append-only violations and agent errors.

    Infrastructure failures are left to the caller, which turns them into the command's error."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Rollout run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    statuses = ", ".join(f"{name} {count}" for name, count in sorted(summary.statuses.items()))
    table.add_row("rollouts", f"{summary.rollouts} ({statuses})")
    # Outcomes, the mean reward and latency are in the closing summary table every command prints.
    table.add_row("mean turns", f"{summary.mean_turns:.2f}")
    if tally.replayed < summary.rollouts:
        table.add_row("throughput", f"{summary.rollouts_per_s:.1f} rollouts/s ({summary.wall_s:.2f} s wall)")
    else:
        table.add_row("throughput", "none run (every rollout read from the journal)")
    violations = f"{summary.violations} in {summary.rollouts_with_violations} rollout(s)"
    table.add_row("append-only violations", violations, style="red" if summary.violations else None)
    if summary.rejected_calls or summary.gateway_errors:
        table.add_row(
            "refused calls / gateway errors",
            f"{summary.rejected_calls} / {summary.gateway_errors}",
            style="yellow",
        )
    if tally.first_gateway_error:
        table.add_row("first gateway error", escape(tally.first_gateway_error), style="yellow")
    if summary.reward_errors:
        table.add_row(
            "reward errors",
            f"{summary.reward_errors} (first: {escape(tally.first_reward_error or '')})",
            style="yellow",
        )
    if summary.tool_errors:
        table.add_row(
            "tool errors",
            f"{summary.tool_errors} (first: {escape(tally.first_tool_error or '')})",
            style="yellow",
        )
    console.print(table)
    for example in tally.violation_examples:
        console.print(f"[red]append-only[/red] {escape(example.rollout_id)}: {escape(example.detail)}")
    if summary.violations > len(tally.violation_examples):
        more = summary.violations - len(tally.violation_examples)
        console.print(f"... and {more} more append-only violation(s); see --output for all of them")
    for example in tally.agent_errors[:3]:
        console.print(
            f"[yellow]agent error[/yellow] {escape(example.rollout_id)}: {escape(example.detail)}",
            highlight=False,
        )
    if tally.agent_error_count > 3:
        console.print(f"... and {tally.agent_error_count - 3} more rollout(s) ended in ERROR; see --output")
    if tally.agent_error_count:
        console.print("(agent tracebacks are logged with --verbose)")
