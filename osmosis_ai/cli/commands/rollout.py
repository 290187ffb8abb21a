"""``osmosis rollout run`` and ``osmosis rollout bench``: drive a rollout server with a local TrainGate.

``run`` sends every dataset row (``--n`` times) through the rollout server — the agent served
in-process with ``-m module:attr``, or an existing server with ``--url`` — answers the agent's LLM
calls with the chosen policy, checks the protocol, and prints a summary (``--output`` keeps one
JSON record per rollout, in dataset order; runs of at most 20 rollouts also get a table with one
row per rollout). The dataset is streamed and the summary tallied as rollouts end, so a run's
memory follows its concurrency, not its dataset. Every finished rollout is committed to a journal
before it counts, so the same command resumes an interrupted run
(:class:`osmosis_ai.runs.executors.traingate.RolloutServer` says what its fingerprint covers).
Everything local is checked first (dataset, reward, tokenizer, agent), then the policy answers one
tiny preflight request, and only then does any rollout start. The last line on stdout counts the
outcomes (printed with ``--quiet`` too); the exit status follows the shared rule of
:func:`osmosis_ai.outcome.verdict`, with the reason on stderr.
``bench`` measures rollouts/s with an instant canned policy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli import output
from osmosis_ai.cli.arguments import (
    absolute_path,
    add_journal_arguments,
    add_log_to_argument,
    add_reward_runtime_arguments,
    add_rows_arguments,
    completion_params,
    finite_number,
    fraction,
    journal_spec,
    model_ref,
    reward_limits,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import setup_logging
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.rollout_target import SERVER_KEY_ENV, add_target_arguments
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import Outputs, add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.cli.trajectories import add_trajectories_argument, trajectory_writer

if TYPE_CHECKING:
    from osmosis_ai.cli.trajectories import TrajectoryWriter
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.rollout_stream import RolloutStream
    from osmosis_ai.runs.run import RunEnd

PER_ROLLOUT_TABLE_LIMIT = 20  # larger runs get the summary only; --output has every rollout


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from osmosis_ai.cli.commands import rollout_bench, rollout_check, rollout_init

    sub = parser.add_subparsers(dest="rollout_command", metavar="{run,bench,check,init,list}", required=True)
    run = sub.add_parser(
        "run",
        help="run a dataset through a rollout server with a local TrainGate",
        description="Run a dataset through a rollout server with a local TrainGate.",
    )
    add_target_arguments(run, adaptive=True)
    run.add_argument(
        "-d",
        "--dataset",
        required=True,
        type=absolute_path,
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
        metavar="DIR",
        help="HuggingFace model directory: prompts rendered by its chat template, token-in-token-out, "
        "drift checked every turn (a bare tokenizer.json only encodes a fixed rendering; default: bytes)",
    )
    run.add_argument(
        "--chat-template", metavar="FILE", help="a .jinja chat template overriding --tokenizer's"
    )
    run.add_argument(
        "--fail-on-drift", action="store_true", help="exit non-zero when any rollout's template drifts"
    )
    add_rows_arguments(run)
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
    run.add_argument(
        "-o", "--output", metavar="FILE.jsonl", type=absolute_path, help="write one JSON record per rollout"
    )
    declare_files(run, read=["dataset", "chat_template"], written=["output"])
    add_trajectories_argument(run, unit="rollout")
    add_journal_arguments(run, unit="rollout")
    add_reward_runtime_arguments(run, what="the --reward function")
    add_summary_arguments(run)
    add_log_to_argument(run)
    run.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not on a terminal"
    )
    run.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no tables: only the outcome line"
    )

    rollout_bench.add_parser(sub)
    rollout_check.add_parser(sub)
    rollout_init.add_parsers(sub)


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.commands import rollout_bench
    from osmosis_ai.cli.loading import agent_spec

    if args.rollout_command in ("init", "list"):
        from osmosis_ai.cli.commands import rollout_init

        return rollout_init.run(args)
    setup_logging(logging.INFO if args.verbose else None)
    if args.rollout_command == "bench":
        return asyncio.run(rollout_bench.bench(args))
    if args.rollout_command == "check":
        from osmosis_ai.cli.commands.rollout_check import check

        return asyncio.run(check(args))
    outputs = Outputs.of(args)
    check_run_outputs(outputs)
    plan = plan_of(args)
    labels = {"command": "rollout run", "model": args.model, "dataset": args.dataset,
              "module": args.url or agent_spec(args)}  # fmt: skip
    report = Report(outputs, args.progress, args.max_failure_rate, args.fail_on_drift, url=args.url)
    return run_command(
        lambda: drive(plan, report, labels), on_interrupt=lambda: output.interrupted("rollout")
    )


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for."""
    from osmosis_ai.cli.loading import agent_ref
    from osmosis_ai.runs.executors.traingate import RolloutServer
    from osmosis_ai.runs.plan import Rows, RunPlan, Scoring

    server = RolloutServer(model_ref(args), agent=None if args.url else agent_ref(args), url=args.url,
                           server_api_key=args.server_api_key, tokenizer=args.tokenizer,
                           chat_template=args.chat_template, gateway_host=args.gateway_host,
                           max_turns=args.max_turns, completion_params=completion_params(args))  # fmt: skip
    rewards = (args.reward,) if args.reward else ()
    scoring = Scoring(rewards, kind="reward function", names=("reward",) if args.reward else (),
                      reward="reward" if args.reward else "agent", **reward_limits(args))  # fmt: skip
    return RunPlan(Rows(args.dataset, args.offset, args.limit), server, scoring, n=args.n, concurrency=args.concurrency,
                   max_concurrency=args.max_concurrency, timeout=args.timeout, journal=journal_spec(args))  # fmt: skip


@dataclass(frozen=True)
class Report:
    """What a rollout run shows and writes, read from its flags once (``eval run`` gives its own):
    ``progress`` draws the bar off a terminal too; a rollout passes with a reward of at least
    ``pass_threshold``; ``url`` is the server behind ``--url``, if any."""

    outputs: Outputs
    progress: bool
    max_failure_rate: float
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
    from osmosis_ai.cli.commands import rollout_check
    from osmosis_ai.cli.rollout_tables import render_rollouts, render_summary
    from osmosis_ai.outcome import verdict
    from osmosis_ai.runs.rollout_stream import figures

    outputs, tally, n = report.outputs, stream.tally, stream.plan.n
    summary = tally.summary(stream.wall_s)
    if not outputs.quiet:
        console = output.rich_console()
        if summary.rollouts <= PER_ROLLOUT_TABLE_LIMIT:
            render_rollouts(tally.lines, console, samples=n > 1)
        render_summary(summary, tally, console)
        rollout_check.render_drift(tally.drift, console)
        if stream.writer is not None:
            print(f"wrote {stream.writer.count} record(s) to {outputs.output}")
        if trajectories is not None:
            print(f"wrote {trajectories.count} ATIF trajectories to {outputs.trajectories}")
    source = str(outputs.output or f"osmosis {command}")
    run_figures = figures(tally, source, samples_per_row=n, command=command)
    show_summary(outputs, None, source, run_figures)
    output.say(summary.outcome_line(), quiet=outputs.json)
    if (drift := rollout_check.drift_line(tally.drift, tally.violations)) is not None:
        output.say(drift, quiet=outputs.json)
    # The records file has every turn; without one, the records kept in memory (turns released).
    finish_run(outputs, outputs.output if outputs.output and not tally.records else tally.records, source,
               run_figures, extra={"concurrency": limit_summary(end.limit)}, end=end)  # fmt: skip
    if not summary.all_terminal:
        lost = summary.rollouts - sum(summary.statuses.get(s, 0) for s in ("COMPLETED", "ERROR"))
        raise CLIError(
            f"{lost} of {summary.rollouts} rollout(s) did not finish: " + "; ".join(summary.infra_failures)
        )
    reason = verdict(summary.outcome_counts, max_failure_rate=report.max_failure_rate, unit="rollout",
                     limit_name="--max-failure-rate")  # fmt: skip
    if reason is not None:
        raise CLIError(reason + tally.first_failure_note())
    if report.fail_on_drift:
        rollout_check.fail_on_drift(tally.drift)
    return 0
