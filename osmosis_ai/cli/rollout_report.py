"""A rollout run on the terminal, for ``osmosis rollout run`` and ``osmosis eval run``: :func:`drive`
runs the plan with its progress and resume lines, ``-o`` written in dataset order as rollouts end
(:class:`~osmosis_ai.runs.rollout_stream.RolloutStream`), then prints one row per rollout (short
runs), what only a rollout run measures — statuses, turns, throughput, the protocol checks and, with
``--tokenizer DIR``, template drift — the summary and the outcome line, and decides the exit status."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli import output
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.rollout_target import SERVER_KEY_ENV
from osmosis_ai.cli.summary import Outputs, finish_run, show_summary
from osmosis_ai.cli.trajectories import trajectory_writer

if TYPE_CHECKING:
    from rich.console import Console

    from osmosis_ai.cli.trajectories import TrajectoryWriter
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.rollout_stream import RolloutStream
    from osmosis_ai.runs.run import RunEnd
    from osmosis_ai.traingate.drift import DriftTally
    from osmosis_ai.traingate.report import RolloutLine, RunSummary, RunTally

PER_ROLLOUT_TABLE_LIMIT = 20  # larger runs get the summary only; --output has every rollout
SHOWN_EVENTS = 5


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


def drift_line(drift: DriftTally, violations: int) -> str | None:
    """One line counting drift beside append-only violations; ``None`` when no template was rendered."""
    if not drift.traced:
        return None
    causes = ", ".join(f"{name} {count}" for name, count in sorted(drift.by_cause.items()))
    counted = f"{drift.events} in {drift.rollouts} rollout(s)" + (f" ({causes})" if causes else "")
    return f"template drift: {counted}; append-only violations: {violations}"


def render_drift(drift: DriftTally, console: Console) -> None:
    """Print the first drift events of a run (``--output`` has all of them)."""
    from rich.markup import escape

    for rollout_id, event in drift.examples[:SHOWN_EVENTS]:
        console.print(f"[red]drift[/red] {escape(rollout_id)}: {escape(event.describe())}", highlight=False)
    if drift.events > SHOWN_EVENTS:
        console.print(
            f"... and {drift.events - SHOWN_EVENTS} more drift event(s); see --output for all of them"
        )


def fail_on_drift(drift: DriftTally) -> None:
    """Raise the ``--fail-on-drift`` error when any rollout drifted."""
    if drift.examples:
        rollout_id, first = drift.examples[0]
        raise CLIError(
            f"template drift in {drift.rollouts} rollout(s) (--fail-on-drift); first: {rollout_id}: {first.describe()}"
        )


@dataclass(frozen=True)
class Report:
    """What a rollout run shows and writes, read from its flags once (``eval run`` gives its own):
    ``progress`` draws the bar off a terminal too; a rollout passes with a reward of at least
    ``pass_threshold``; ``url`` is the server behind ``--url``, if any."""

    outputs: Outputs
    progress: bool
    fail_on_drift: bool
    pass_threshold: float = 1.0
    url: str | None = None


async def drive(plan: RunPlan, report: Report, labels: dict[str, Any]) -> int:
    """Run ``plan``'s rollouts the journal does not have (each committed before it counts), write
    ``-o`` whole in dataset order, and report; ``labels`` name the run in listings (its ``command``
    in the report too). ``osmosis eval run`` drives its workspace rollout through this as well."""
    from osmosis_ai.cli.arguments import limit_line
    from osmosis_ai.cli.journals import journal_refusals, resuming_line
    from osmosis_ai.cli.output_file import is_regular_output, open_output
    from osmosis_ai.runs.events import Opened, Ready
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.rollout_stream import RolloutStream
    from osmosis_ai.runs.run import journal_file
    from osmosis_ai.traingate.launcher import ServerKeyRefused
    from osmosis_ai.traingate.report import RunTally

    outputs, quiet = report.outputs, report.outputs.quiet
    trajectories = trajectory_writer(outputs, command=labels["command"])
    tally = RunTally(keep_lines=PER_ROLLOUT_TABLE_LIMIT + 1, pass_threshold=report.pass_threshold)
    on_record = None if trajectories is None else partial(trajectories.write_record, model=labels["model"])
    # --report without -o reads the rollouts from memory, so then every one is kept.
    keep_all = bool(outputs.report) and not (outputs.output and is_regular_output(outputs.output))
    stream = RolloutStream(plan, tally, output=outputs.output, opener=lambda path: open_output(path, flag="--output"),
                           on_record=on_record, keep_all=keep_all)  # fmt: skip
    advance: Any = None

    def on_event(event: Any) -> None:
        nonlocal advance
        if isinstance(event, Result):
            advance(score=event.reward if event.success else None, failed=not event.success)
        elif isinstance(event, Opened):
            if event.set_aside is not None:
                output.warn(event.set_aside.describe())
            if tally.replayed:
                line = resuming_line(tally.replayed, event.planned, "rollout", failed=event.failed,
                                     retry_failed=bool(plan.journal and plan.journal.retry_failed), kept=event.kept)  # fmt: skip
                output.say(f"{line} (journal {event.journal})", quiet=quiet)
                if report.url:
                    output.say(f"Note: the code behind --url {report.url} cannot be fingerprinted; if it changed "
                               "since, rerun with --fresh", quiet=quiet)  # fmt: skip
            show = not quiet and (report.progress or sys.stdout.isatty())
            advance = stack.enter_context(
                output.progress_bar(event.remaining, "rollouts", enabled=show, stderr=False)
            )
        elif isinstance(event, Ready):
            for line in event.scoring:
                output.say(f"Scoring: {line}", quiet=quiet)
            if event.backend:
                output.say(event.backend, quiet=quiet)

    try:
        with contextlib.ExitStack() as stack, journal_refusals(journal_file(plan)):
            end = await stream.run(on_event, labels=labels)
    except ServerKeyRefused as exc:
        raise CLIError(f"{exc}; give the server's key with --server-api-key or ${SERVER_KEY_ENV}") from None
    except OSError as exc:
        if stream.writer is None or stream.writer.error is None:
            raise
        raise CLIError(f"cannot write --output {outputs.output}: {exc.strerror or exc}") from None
    if (line := limit_line(end.limit)) is not None:
        output.say(line, quiet=quiet)
    return _finish(report, stream, trajectories, end, labels["command"])


def _finish(
    report: Report, stream: RolloutStream, trajectories: TrajectoryWriter | None, end: RunEnd, command: str
) -> int:
    """Report the run (tables, summary, the outcome line, --json/--report) and decide its exit status."""
    from osmosis_ai.cli.arguments import limit_summary
    from osmosis_ai.runs.rollout_stream import figures

    outputs, tally, n = report.outputs, stream.tally, stream.plan.n
    summary = tally.summary(stream.wall_s)
    if not outputs.quiet:
        console = output.rich_console()
        if summary.rollouts <= PER_ROLLOUT_TABLE_LIMIT:
            render_rollouts(tally.lines, console, samples=n > 1)
        render_summary(summary, tally, console)
        render_drift(tally.drift, console)
        if stream.writer is not None:
            print(f"wrote {stream.writer.count} record(s) to {outputs.output}")
        if trajectories is not None:
            print(f"wrote {trajectories.count} ATIF trajectories to {outputs.trajectories}")
    source = str(outputs.output or f"osmosis {command}")
    run_figures = figures(tally, source, samples_per_row=n, command=command)
    show_summary(outputs, None, source, run_figures)
    output.say(summary.outcome_line() + end.backend_note, quiet=outputs.json)
    if (drift := drift_line(tally.drift, tally.violations)) is not None:
        output.say(drift, quiet=outputs.json)
    # The records file has every turn; without one, the records kept in memory (turns released).
    finish_run(outputs, outputs.output if outputs.output and not tally.records else tally.records, source,
               run_figures, extra={"concurrency": limit_summary(end.limit)}, end=end)  # fmt: skip
    if not summary.all_terminal:
        lost = summary.rollouts - sum(summary.statuses.get(s, 0) for s in ("COMPLETED", "ERROR"))
        raise CLIError(
            f"{lost} of {summary.rollouts} rollout(s) did not finish: " + "; ".join(summary.infra_failures)
        )
    reason = outputs.failure(summary.outcome_counts, "rollout")
    if reason is not None:
        raise CLIError(reason + tally.first_failure_note())
    if report.fail_on_drift:
        fail_on_drift(tally.drift)
    return 0
