"""``osmosis eval``: run an agent over a dataset ``--n`` times per row and score each run with eval functions.

Order: the local checks (agent, eval functions, dataset and its first row, the journal), then one
preflight request to the model (and one to ``--baseline-model``), then the samples,
``--concurrency`` (0.2: ``--batch-size``) at a time. Every finished sample is committed to the run's journal before it
counts, so an interrupted run (Ctrl-C, a crash, ``kill -9``) resumes where it stopped when the same
command is run again; a changed dataset or configuration is refused with the reason (``--fresh``
starts over, keeping the old journal as a backup; ``--retry-failed`` also reruns samples the model
failed). Samples lost to infrastructure are never kept as finished.

The report (:mod:`osmosis_ai.runs.summary`) counts the outcomes beside the pass rate and gives
each model its own summary; with a baseline, a paired comparison over the same rows. Failed samples
have no score: they are counted, never scored 0. Exit status by the shared rule
(:func:`osmosis_ai.outcome.verdict`), applied to each model. ``osmosis eval cache`` is
:mod:`osmosis_ai.cli.eval.cache`.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import (
    absolute_path,
    add_agent_run_arguments,
    add_backend_arguments,
    add_journal_arguments,
    add_max_concurrency_argument,
    add_reward_runtime_arguments,
    check_backend_arguments,
    concurrency_value,
    finite_number,
    in_process_agent,
    journal_spec,
    limit_summary,
    model_ref,
    reward_limits,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError, UsageError
from osmosis_ai.cli.eval import cache
from osmosis_ai.cli.eval import run as eval_run
from osmosis_ai.cli.loading import agent_spec
from osmosis_ai.cli.output import interrupted, say, setup_logging
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import Outputs, add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.cli.trajectories import add_trajectories_argument, trajectory_writer
from osmosis_ai.consts import PACKAGE_VERSION

if TYPE_CHECKING:
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.run import RunEnd

DEBUG_DIR = "local_debug"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_agent_run_arguments(parser, unit="run", required=False)
    add_trajectories_argument(parser, unit="run")
    parser.add_argument("--eval-fn", action="append", metavar="MODULE:FN",
                        help="eval function (repeatable): fn(solution_str, ground_truth, extra_info) "
                        "or fn(messages, ground_truth, metadata)")  # fmt: skip
    parser.add_argument("--n", type=whole_number(1), default=1, help="runs per row (default 1)")
    parser.add_argument("--pass-threshold", type=finite_number(), default=1.0,
                        help="a run passes when its score is at least this (default 1.0)")  # fmt: skip
    parser.add_argument("--concurrency", "--batch-size", dest="batch_size", type=concurrency_value, default=1,
                        metavar="N|auto", help="runs in flight, or 'auto' to follow what the model server can "
                        "take (default 1; --batch-size is 0.2's spelling)")  # fmt: skip
    add_max_concurrency_argument(parser, "--concurrency")
    parser.add_argument("--baseline-model", help="a second model run over the same rows, for comparison")
    parser.add_argument("--baseline-base-url", help="OpenAI-compatible base URL serving --baseline-model")
    parser.add_argument("--baseline-api-key", help="API key of --baseline-model")
    add_journal_arguments(parser, unit="run")
    add_reward_runtime_arguments(parser, what="eval functions")
    add_backend_arguments(parser)
    parser.add_argument("--output-path", metavar="DIR", type=absolute_path,
                        help="write results_<unix>_<task id>.json under DIR/<model>/<dataset>/")  # fmt: skip
    parser.add_argument("--log-samples", action="store_true",
                        help="keep each run's final messages (a .jsonl beside the journal and the results)")  # fmt: skip
    declare_files(
        parser,
        derived={"the --log-samples file of --journal": (_samples_file, "choose another --journal path")},
    )
    parser.add_argument("--debug", action="store_true",
                        help=f"show library log messages and write the agents' traces to ./{DEBUG_DIR}")  # fmt: skip
    add_summary_arguments(parser, log_to=True)
    commands = parser.add_subparsers(dest="eval_command", metavar="{cache,run}")
    cache.add_parser(commands)
    eval_run.add_parser(commands)


def _samples_file(args: argparse.Namespace) -> str | None:
    """Where ``--log-samples`` appends, when ``--journal`` names the journal it goes beside."""
    from osmosis_ai.runs.journal_store import samples_path

    return str(samples_path(Path(args.journal))) if args.journal and args.log_samples else None


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.eval.report import check_output_path, run_member
    from osmosis_ai.runs.journal_store import journal_root

    if getattr(args, "eval_command", None) == "cache":
        return cache.run(args)
    if getattr(args, "eval_command", None) == "run":
        return eval_run.run(args)
    # As in 0.2, a missing -d or --eval-fn is a usage error and a missing agent a value error; a 0.3
    # workflow's --grader scores it, so it needs no eval function.
    agent = "-m/--module (or --mcp/--mcp-url)"
    missing = [flag for flag, value in ((agent, args.module or args.mcp or args.mcp_url),
                                        ("-d/--dataset", args.dataset),
                                        ("--eval-fn", args.eval_fn or args.grader)) if not value]  # fmt: skip
    if missing and missing != [agent]:
        raise UsageError(f"the following arguments are required: {', '.join(missing)}")
    if missing:
        raise CLIError(f"osmosis eval needs {agent} (see osmosis eval --help)")
    args.eval_fn = args.eval_fn or []
    if (args.baseline_base_url or args.baseline_api_key) and not args.baseline_model:
        raise CLIError("--baseline-base-url and --baseline-api-key need --baseline-model")
    check_backend_arguments(args, args.batch_size)
    setup_logging(logging.DEBUG if args.debug else None)
    outputs = Outputs.of(args)
    if len(set(args.eval_fn)) != len(args.eval_fn):
        raise CLIError("each --eval-fn may be given once")
    say(f"osmosis-eval v{PACKAGE_VERSION}", quiet=outputs.quiet)
    output_dir = check_output_path(Path(args.output_path), journal_root()) if args.output_path else None
    check_run_outputs(outputs)
    plan = plan_of(args)
    names = (*args.eval_fn, *([args.grader] if args.grader else []))
    config: dict[str, Any] = {"model": args.model, "n_runs": args.n, "pass_threshold": args.pass_threshold,
                              "eval_fns": list(args.eval_fn)}  # fmt: skip
    if args.baseline_model:
        config["baseline_model"] = args.baseline_model
    labels = {"model": args.model, "dataset": args.dataset, "module": agent_spec(args),
              "baseline_model": args.baseline_model}  # fmt: skip
    structured = {**config, "dataset": args.dataset, "module": labels["module"], "base_url": args.base_url,
                  "offset": args.offset, "limit": args.limit, "max_turns": args.max_turns}  # fmt: skip
    report = Report(outputs, names, config, structured, run_member(args), args.baseline_model, output_dir)
    return run_command(lambda: _eval(plan, report, labels), on_interrupt=lambda: interrupted("run"))


@dataclass(frozen=True)
class Report:
    """What the run shows and writes, read from the flags once: the eval functions (and grader) by
    name, the ``-o`` file's ``config``, the ``--output-path`` file's, its ``run`` member,
    ``--baseline-model`` and ``--output-path``."""

    outputs: Outputs
    names: tuple[str, ...]
    config: dict[str, Any]
    structured: dict[str, Any]
    run: dict[str, Any]
    baseline_model: str | None
    output_dir: Path | None


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for."""
    from osmosis_ai.runs.journal import BASELINE, PRIMARY
    from osmosis_ai.runs.plan import ModelRef, Rows, RunPlan, Scoring

    models = [(PRIMARY, model_ref(args))]
    if args.baseline_model:
        models.append(
            (BASELINE, ModelRef(args.baseline_model, args.baseline_base_url, args.baseline_api_key))
        )
    executor = in_process_agent(args, tuple(models), "eval", DEBUG_DIR)
    scoring = Scoring(tuple(args.eval_fn), agent_score=args.grader, **reward_limits(args))
    return RunPlan(Rows(args.dataset, args.offset, args.limit), executor, scoring, n=args.n,
                   concurrency=args.batch_size, max_concurrency=args.max_concurrency, timeout=args.timeout,
                   journal=journal_spec(args, keep_messages=args.log_samples), backend=args.backend,
                   ray_address=args.ray_address)  # fmt: skip


async def _eval(plan: RunPlan, report: Report, labels: dict[str, Any]) -> int:
    from osmosis_ai.cli.arguments import limit_line
    from osmosis_ai.cli.eval.samples import SampleProgress
    from osmosis_ai.cli.journals import journal_refusals
    from osmosis_ai.outcome import plural
    from osmosis_ai.runs.journal import BASELINE
    from osmosis_ai.runs.result import Result
    from osmosis_ai.runs.run import journal_file, run

    quiet, n, baseline, model = report.outputs.quiet, plan.n, report.baseline_model, labels["model"]
    trajectories = trajectory_writer(report.outputs, command="eval")

    def opening(event: Any) -> str:
        models = f" x2 models (baseline {baseline})" if baseline else ""
        return (f"Dataset: {event.dataset} ({event.rows} {plural('row', event.rows)} x {n} {plural('run', n)}"
                f"{models}); journal {event.journal}")  # fmt: skip

    retry_failed = plan.journal is not None and plan.journal.retry_failed
    progress = SampleProgress(tagged=bool(baseline), quiet=quiet, unit="run", label="eval",
                              retry_failed=retry_failed, opening=opening)  # fmt: skip

    def on_event(event: Any) -> None:
        progress.on_event(event)
        if isinstance(event, Result) and trajectories is not None:
            trajectories.write_result(event, model=baseline if event.item.model_tag == BASELINE else model)

    journal = journal_file(plan)
    with progress, journal_refusals(journal):
        end = await run(plan, on_event, labels=labels)
    if (line := limit_line(end.limit)) is not None:
        say(line, quiet=quiet)
    return _report(report, labels, end, journal)


def _report(report: Report, labels: dict[str, Any], end: RunEnd, journal: Path) -> int:
    from osmosis_ai.cli.eval.report import (
        outcome_line,
        print_comparison,
        print_summary,
        structured_results,
        write_json,
        write_structured,
    )
    from osmosis_ai.runs.summary import eval_results, structured_document

    outputs, quiet, output_dir = report.outputs, report.outputs.quiet, report.output_dir
    model, dataset, task_id = labels["model"], labels["dataset"], end.task_id
    # With -q and nothing written, only the outcome line (counts) is shown: the figures, two
    # thousand bootstrap resamples per eval function, would be computed for no one.
    wanted = not quiet or bool(
        outputs.output or output_dir or outputs.json or outputs.report or outputs.log_to
    )
    results = eval_results(end, report.names if wanted else (), report.config)
    primary, baseline = results.primary, results.baseline
    # The summary table below has the primary model's figures; a baseline adds its own and the pairing.
    if results.comparison is not None and baseline is not None:
        print_summary(primary, quiet=quiet, title="Results")
        print_summary(baseline, quiet=quiet, title="Baseline")
        print_comparison(results.comparison, quiet=quiet)
    document, samples_file = results.document, end.samples_path
    document["run"] = dict(report.run)
    if samples_file is not None and samples_file.exists():
        document["run"]["samples"] = str(samples_file)
    figures = show_summary(outputs, document, outputs.output or "osmosis eval")
    # Where the results are, then the outcome line, the last (even with -q, which prints only it).
    if outputs.output:
        write_json(Path(outputs.output), document, flag="--output")
        say(f"Results written to: {outputs.output}", quiet=quiet)
    earlier = (
        structured_results(output_dir, model=model, dataset=dataset, task_id=task_id)
        if output_dir is not None and end.idle
        else []
    )
    if earlier:
        say(f"Nothing was left to run: the results are already in {earlier[-1]}", quiet=quiet)
    elif output_dir is not None and end.status == "completed":
        structured, samples = structured_document(results, end, report.structured)
        written = write_structured(output_dir, model=model, dataset=dataset, task_id=task_id,
                                   document=structured, samples=samples)  # fmt: skip
        for path in written:
            say(f"Wrote {path}", quiet=quiet)
    elif not outputs.output:
        say(f"Results kept in the journal: {journal} (osmosis report reads it)", quiet=quiet)
    if samples_file is not None and samples_file.exists():
        say(f"Samples written to: {samples_file}", quiet=quiet)
    if outputs.trajectories:
        say(f"Trajectories written to: {outputs.trajectories}", quiet=quiet)
    say(outcome_line(primary, baseline, end.planned) + end.backend_note, quiet=outputs.json)
    source = outputs.output or "osmosis eval"
    finish_run(outputs, document, source, figures, extra={"concurrency": limit_summary(end.limit)}, end=end)
    if end.stop is not None:
        raise CLIError(
            f"the run stopped: {end.stop} (finished runs are kept; run the same command again to resume)"
        )
    reasons = [outputs.failure(s.counts, "run") for s in (primary, baseline) if s is not None]
    reason = reasons[0] or (f"baseline: {reasons[1]}" if len(reasons) > 1 and reasons[1] else None)
    done = primary.counts.total + (baseline.counts.total if baseline else 0)
    if reason is None and done < end.planned:
        reason = f"{end.planned - done} of {end.planned} runs did not finish"
    if reason is not None:
        raise CLIError(reason)
    return 0
