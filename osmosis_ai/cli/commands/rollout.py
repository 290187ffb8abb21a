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
import time
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli import output
from osmosis_ai.cli.arguments import (
    absolute_path,
    add_journal_arguments,
    add_log_to_argument,
    add_reward_runtime_arguments,
    add_rows_arguments,
    finite_number,
    fraction,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import setup_logging
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.rollout_target import SERVER_KEY_ENV, add_target_arguments
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import Figures, add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.cli.trajectories import add_trajectories_argument, trajectory_writer

if TYPE_CHECKING:
    from osmosis_ai.cli.trajectories import TrajectoryWriter
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.run import RunEnd
    from osmosis_ai.traingate.report import OrderedRecordWriter, RunSummary, RunTally

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

    if args.rollout_command in ("init", "list"):
        from osmosis_ai.cli.commands import rollout_init

        return rollout_init.run(args)
    setup_logging(logging.INFO if args.verbose else None)
    if args.rollout_command == "bench":
        return asyncio.run(rollout_bench.bench(args))
    if args.rollout_command == "check":
        from osmosis_ai.cli.commands.rollout_check import check

        return asyncio.run(check(args))
    return run_command(lambda: _run(args), on_interrupt=lambda: output.interrupted("rollout"))


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for."""
    from osmosis_ai.cli.commands.eval import completion_params
    from osmosis_ai.cli.loading import agent_ref
    from osmosis_ai.runs.executors.traingate import RolloutServer
    from osmosis_ai.runs.plan import JournalSpec, ModelRef, Rows, RunPlan, Scoring

    server = RolloutServer(ModelRef(args.model, args.base_url, args.api_key),
                           agent=None if args.url else agent_ref(args), url=args.url,
                           server_api_key=args.server_api_key, tokenizer=args.tokenizer,
                           chat_template=args.chat_template, gateway_host=args.gateway_host,
                           max_turns=args.max_turns, completion_params=completion_params(args))  # fmt: skip
    scoring = Scoring(tuple([args.reward] if args.reward else []), kind="reward function",
                      names=("reward",) if args.reward else (), reward="reward" if args.reward else "agent",
                      timeout=args.reward_timeout or None, workers=args.reward_workers,
                      memory_limit_mb=args.reward_memory_limit)  # fmt: skip
    return RunPlan(Rows(args.dataset, args.offset, args.limit), server, scoring, n=args.n, concurrency=args.concurrency,
                   max_concurrency=args.max_concurrency, timeout=args.timeout,
                   journal=JournalSpec(args.journal, fresh=args.fresh, retry_failed=args.retry_failed))  # fmt: skip


def _record_window(concurrency: int) -> int:
    """How many finished records the in-order writer may hold back: enough that one slow rollout
    rarely pauses the others, few enough that memory stays bounded."""
    return max(4 * concurrency, 256)


async def _run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.loading import agent_spec

    check_run_outputs(args)
    labels = {"command": "rollout run", "model": args.model, "dataset": args.dataset,
              "module": args.url or agent_spec(args)}  # fmt: skip
    return await drive(args, plan_of(args), labels)


async def drive(
    args: argparse.Namespace, plan: RunPlan, labels: dict[str, Any], *, pass_threshold: float = 1.0
) -> int:
    """Run ``plan``'s rollouts the journal does not have (each committed before it counts), write
    ``--output`` whole in dataset order, and report (a rollout passes with a reward of at least
    ``pass_threshold``); ``labels`` name the run in listings (its ``command`` in the report too).
    ``osmosis eval run`` drives its workspace rollout through this as well."""
    from osmosis_ai.cli.arguments import limit_line
    from osmosis_ai.cli.journals import journal_refusals, resuming_line
    from osmosis_ai.cli.output_file import is_regular_output, open_output
    from osmosis_ai.runs.events import ItemsDone, Opened, Ready
    from osmosis_ai.runs.items import WorkItem
    from osmosis_ai.runs.journal import runs_again
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.run import journal_file, run
    from osmosis_ai.traingate.launcher import ServerKeyRefused
    from osmosis_ai.traingate.report import OrderedRecordWriter, RunTally

    args.quiet = args.quiet or args.json
    trajectories = trajectory_writer(args, command=labels["command"])
    state: dict[str, Any] = {"writer": None, "started": time.perf_counter(), "wall": 0.0,
                             "trajectories": trajectories}  # fmt: skip
    tally = RunTally(keep_lines=PER_ROLLOUT_TABLE_LIMIT + 1, pass_threshold=pass_threshold)

    first = args.offset * args.n  # the writer numbers the selected rollouts from 0

    def sequence(item: WorkItem) -> int:
        return item.row_index * args.n + item.sample_index - first

    async def admit(item: WorkItem) -> None:
        if state["writer"] is not None:
            await state["writer"].admit(sequence(item))

    async def on_event(event: Any) -> None:
        writer: OrderedRecordWriter | None = state["writer"]
        if isinstance(event, Result):
            record = event.record()  # committed to the journal by the engine before this
            record["model"] = args.model  # what the report prices the tokens with
            tally.add_record(record)
            if trajectories is not None:  # off the loop the rollouts share: a file is fsynced
                await asyncio.to_thread(trajectories.write_record, record)
            if writer is not None:
                # Written as soon as every earlier rollout is, in dataset order, by a writer thread.
                await writer.put_record(sequence(event.item), record)
            state["advance"](score=event.reward if event.success else None, failed=not event.success)
        elif isinstance(event, Opened):
            total = event.planned
            if event.set_aside is not None:
                output.warn(event.set_aside.describe())
            # --report without -o reads the rollouts from memory, so then every one is kept.
            if args.report and not (args.output and is_regular_output(args.output)):
                tally.keep_records = total
            replayed = 0
            for kept in event.journaled() if event.journaled else ():
                if not runs_again(kept.outcome, retry_failed=args.retry_failed):
                    tally.add_record(kept.data, replayed=True)
                    replayed += 1
                    if trajectories is not None:  # DIR gets every rollout of the run, resumed ones too
                        trajectories.write_record(kept.data, model=args.model)
            if replayed:
                line = resuming_line(
                    replayed,
                    total,
                    "rollout",
                    failed=event.failed,
                    retry_failed=args.retry_failed,
                    kept=event.kept,
                )
                output.say(f"{line} (journal {event.journal})", quiet=args.quiet)
                if args.url:
                    output.say(f"Note: the code behind --url {args.url} cannot be fingerprinted; if it changed "
                               "since, rerun with --fresh", quiet=args.quiet)  # fmt: skip
            if args.output:
                journaled = event.journaled

                def premade(start: int, stop: int) -> Any:
                    for kept in (
                        journaled(start=divmod(start + first, args.n), stop=divmod(stop + first, args.n))
                        if journaled
                        else ()
                    ):
                        yield kept.data

                # Opened once the preflight passed (or nothing is left to run): a refused run writes no file.
                state["writer"] = OrderedRecordWriter(args.output, window=_record_window(event.in_flight),
                                                      premade=premade,
                                                      opener=lambda path: open_output(path, flag="--output"))  # fmt: skip
            show = not args.quiet and (args.progress or sys.stdout.isatty())
            state["advance"] = stack.enter_context(
                output.progress_bar(event.remaining, "rollouts", enabled=show, stderr=False)
            )
            state["total"] = total
        elif isinstance(event, Ready):
            for line in event.scoring:
                output.say(f"Scoring: {line}", quiet=args.quiet)
            if event.backend:
                output.say(event.backend, quiet=args.quiet)
            if writer is not None:
                state["opened"] = stack.enter_context(writer)
            state["started"] = time.perf_counter()
        elif isinstance(event, ItemsDone):
            state["wall"] = time.perf_counter() - state["started"]
            if writer is not None:
                if "opened" not in state:
                    state["opened"] = stack.enter_context(writer)
                await writer.complete(state["total"])

    try:
        with contextlib.ExitStack() as stack, journal_refusals(journal_file(plan)):
            end = await run(plan, on_event, labels=labels, before_start=admit, collect=False)
    except ServerKeyRefused as exc:
        raise CLIError(f"{exc}; give the server's key with --server-api-key or ${SERVER_KEY_ENV}") from None
    except OSError as exc:
        writer = state["writer"]
        if writer is None or writer.error is None:
            raise
        raise CLIError(f"cannot write --output {args.output}: {exc.strerror or exc}") from None
    if (line := limit_line(end.limit)) is not None:
        output.say(line, quiet=args.quiet)
    return _finish(args, tally, state, end, labels["command"])


def _finish(
    args: argparse.Namespace, tally: RunTally, state: dict[str, Any], end: RunEnd, command: str
) -> int:
    """Report the run (tables, summary, the outcome line, --json/--report) and decide its exit status."""
    from osmosis_ai.cli.arguments import limit_summary
    from osmosis_ai.cli.commands import rollout_check
    from osmosis_ai.cli.rollout_tables import render_rollouts, render_summary

    writer: OrderedRecordWriter | None = state["writer"]
    trajectories: TrajectoryWriter | None = state["trajectories"]
    summary = tally.summary(state["wall"])
    if not args.quiet:
        console = output.rich_console()
        if summary.rollouts <= PER_ROLLOUT_TABLE_LIMIT:
            render_rollouts(tally.lines, console, samples=args.n > 1)
        render_summary(summary, tally, console)
        rollout_check.render_drift(tally.drift, console)
        if writer is not None:
            print(f"wrote {writer.count} record(s) to {args.output}")
        if trajectories is not None:
            print(f"wrote {trajectories.count} ATIF trajectories to {args.trajectories}")
    source = str(args.output or f"osmosis {command}")
    figures = run_figures(tally, source, samples_per_row=args.n, command=command)
    show_summary(args, None, source, figures)
    output.say(outcome_line(summary) + end.backend_note, quiet=args.json)
    if (drift := rollout_check.drift_line(tally.drift, tally.violations)) is not None:
        output.say(drift, quiet=args.json)
    # The records file has every turn; without one, the records kept in memory (turns released).
    finish_run(args, args.output if args.output and not tally.records else tally.records, source, figures,
               extra={"concurrency": limit_summary(end.limit)}, end=end)  # fmt: skip
    if not summary.all_terminal:
        lost = summary.rollouts - sum(summary.statuses.get(s, 0) for s in ("COMPLETED", "ERROR"))
        raise CLIError(
            f"{lost} of {summary.rollouts} rollout(s) did not finish: " + "; ".join(summary.infra_failures)
        )
    from osmosis_ai.outcome import verdict

    reason = verdict(
        summary.outcome_counts,
        max_failure_rate=args.max_failure_rate,
        unit="rollout",
        limit_name="--max-failure-rate",
    )
    if reason is not None:
        raise CLIError(reason + _first_failure(tally))
    if args.fail_on_drift:
        rollout_check.fail_on_drift(tally.drift)
    return 0


def run_figures(
    tally: RunTally, source: str, *, samples_per_row: int, command: str = "rollout run"
) -> Figures:
    """The summary of the run, as reading its records file would give it (unpriced, like the
    records, which name no model: pricing would import LiteLLM, seconds, for one figure)."""
    from osmosis_ai.outcome import Outcome
    from osmosis_ai.report.figures import summary_of
    from osmosis_ai.report.model import Run

    counted = tally.counted_tokens
    summary = summary_of(
        outcomes={o.value: tally.outcomes[o] for o in Outcome},
        scores=tally.scores,
        samples_per_row=samples_per_row,
        latencies_ms=tally.latencies,
        prompt_tokens=tally.prompt_tokens if counted else None,
        completion_tokens=tally.completion_tokens if counted else None,
        violations=tally.violations,
        drift_events=tally.drift.events,
        price=False,
        dataset_rows=-(-tally.rollouts // samples_per_row),  # every row runs --n times
        tool_errors=tally.tool_errors,
    )
    return Run(source, command, []), summary


def outcome_line(summary: RunSummary) -> str:
    """The one line every run prints: outcome counts beside the pass rate, the mean reward, and how
    many tool calls were answered with an error (arguments the tool rejected included)."""
    from osmosis_ai.outcome import plural

    line = summary.outcome_counts.describe("rollout")
    if summary.mean_reward is not None:
        line += f"; mean reward {summary.mean_reward:.3f} over {summary.rewarded} completed"
    if summary.tool_errors:
        line += f"; {summary.tool_errors} tool {plural('error', summary.tool_errors)}"
    return line


def _first_failure(tally: RunTally) -> str:
    """``"; first: <rollout id> (<outcome>): <why>"`` for the first failed rollout, to start the diagnosis."""
    first = tally.first_failure
    if first is None or not first.detail:
        return ""
    return f"; first: {first.rollout_id} ({first.outcome.value}): {first.detail[:200]}"
