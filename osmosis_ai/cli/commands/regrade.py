"""``osmosis regrade RESULTS... (--reward MODULE:FN | --eval-fn MODULE:FN ... | --rubric ID [-c CONFIG])``:
score the answers of an earlier run again with another grader, without running the agent or calling
any model (a rubric's judge calls are the only model calls).

The inputs are what ``rollout run -o``, ``test -o``, ``eval -o`` (with its ``--log-samples`` file for
the final messages) and ``eval-rubric -o`` write, read and joined by (row, sample) by
:mod:`osmosis_ai.runs.earlier`, each answer scored against the dataset row its record keeps
(``input_record``), or the row of ``-d DATASET`` by row index for a file that keeps none. The answers go
through the run engine like every run: the stored answers of
:class:`~osmosis_ai.runs.executors.stored.EarlierRuns`, each sent inside its work item (so Ray
workers need none of the files), the one scorer, the journal (resumable). ``-r K`` scores each answer
K times (journal tags ``repeat-1``...), for the grader's variance; with ``--rubric --cache`` only the
first scoring may come from the judgment cache, never a repeat. ``--concurrency N`` answers are
scored at once; with ``--rubric``, ``--concurrency auto`` follows what the judge's server can take
(:mod:`osmosis_ai.models.concurrency`, bounded by ``--max-concurrency``) and the summary and
``--json`` say what the limit did.

The command is flag checks (:func:`run`) -> the plan (:func:`plan_of`) ->
:func:`osmosis_ai.runs.run.run` -> render (:func:`_render`); ``-o`` writes JSON lines in the engine's
record format (what ``rollout run -o`` writes), each with its final messages and a ``regrade``
object saying where the answer came from, the grader, and the earlier outcome and reward.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import (
    absolute_path,
    add_backend_arguments,
    add_journal_arguments,
    add_max_concurrency_argument,
    add_reward_runtime_arguments,
    check_backend_arguments,
    concurrency_value,
    finite_number,
    journal_spec,
    reward_limits,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import interrupted, say
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import Outputs, add_summary_arguments, check_run_outputs
from osmosis_ai.runs.judging import JUDGE_CONCURRENCY

if TYPE_CHECKING:
    from osmosis_ai.runs.earlier import Regraded
    from osmosis_ai.runs.events import Opened
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.run import RunEnd

# Answers in flight: for a reward, the runtime's workers bound the scoring itself; a judge is a
# provider's rate limit away from failing, so it gets eval-rubric's default.
CONCURRENCY = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="results files of earlier runs (rollout run -o, test -o, eval -o and its "
                        "--log-samples file, eval-rubric -o)")  # fmt: skip
    grader = parser.add_mutually_exclusive_group(required=True)
    grader.add_argument("--reward", metavar="MODULE:FN",
                        help="score with fn(solution_str, ground_truth, extra_info)")  # fmt: skip
    grader.add_argument("--eval-fn", action="append", metavar="MODULE:FN",
                        help="score with eval functions (repeatable; the first is the score compared)")  # fmt: skip
    grader.add_argument(
        "--rubric", metavar="ID", help="score with the LLM judge of this rubric (see eval-rubric)"
    )
    parser.add_argument("-c", "--config", type=Path, metavar="CONFIG",
                        help="with --rubric: the rubric config YAML (default: rubric_configs.yaml next to the "
                        "first input, in the current directory, or in ./examples)")  # fmt: skip
    parser.add_argument("--cache", action="store_true",
                        help="with --rubric: reuse identical earlier judgments for the first scoring (never for -r repeats)")  # fmt: skip
    parser.add_argument("--concurrency", type=concurrency_value, metavar="N|auto",
                        help=f"answers scored at once (default {CONCURRENCY}; {JUDGE_CONCURRENCY} with --rubric); "
                        "with --rubric, 'auto' follows what the judge's server can take")  # fmt: skip
    add_max_concurrency_argument(parser, "--concurrency")
    parser.add_argument("-d", "--dataset", type=absolute_path,
                        help="the run's dataset, for each row's ground_truth and columns (joined by row index); "
                        "needed only for results files that keep no input_record (written by earlier releases)")  # fmt: skip
    parser.add_argument("-r", "--repeats", type=whole_number(1), default=1, metavar="K",
                        help="score each answer K times and report how the scores vary (default 1)")  # fmt: skip
    parser.add_argument("--only-failed", action="store_true",
                        help="score only the answers whose earlier scoring failed; keep the others as they were")  # fmt: skip
    parser.add_argument("--pass-threshold", type=finite_number(), metavar="SCORE",
                        help="an answer passes when its score is at least this (default: the input's, else 1.0)")  # fmt: skip
    parser.add_argument("-o", "--output", type=absolute_path, metavar="FILE.jsonl",
                        help="write the regraded records (never one of the inputs)")  # fmt: skip
    declare_files(parser, read=["results", "dataset", "config"], written=["output"])
    add_journal_arguments(parser, unit="answer")
    add_reward_runtime_arguments(parser, what="the grader", prefixes=("--reward-", "--"))
    add_backend_arguments(parser)
    add_summary_arguments(parser, log_to=True)
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")


def run(args: argparse.Namespace) -> int:
    if (args.config or args.cache) and not args.rubric:
        raise CLIError("-c/--config and --cache go with --rubric")
    if args.concurrency == "auto" and not args.rubric:
        raise CLIError(
            "--concurrency auto follows a judge's server, so it goes with --rubric; "
            "give --concurrency N for --reward/--eval-fn"
        )
    check_backend_arguments(args, args.concurrency, calls="judge requests")
    outputs = Outputs.of(args)
    check_run_outputs(outputs)
    plan, threshold = plan_of(args), args.pass_threshold
    return run_command(lambda: _regrade(plan, outputs, threshold), on_interrupt=lambda: interrupted("answer"))


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for: the inputs' answers, scored by the grader."""
    from osmosis_ai.runs.executors.stored import EarlierRuns, StoredAnswers
    from osmosis_ai.runs.plan import Rows, RunPlan, Scoring

    inputs = tuple(str(p) for p in args.results)
    base_url = None
    if args.rubric:
        from osmosis_ai.cli.eval_rubric.session import rubric_scoring

        scoring, grader, base_url = rubric_scoring(
            args.rubric, args.config, Path(inputs[0]), cache=args.cache
        )
    else:
        specs = (args.reward,) if args.reward else tuple(args.eval_fn)
        if len(set(specs)) != len(specs):
            raise CLIError("each --eval-fn may be given once")
        names = ("reward",) if args.reward else specs
        grader = " ".join(f"{'--reward' if args.reward else '--eval-fn'} {spec}" for spec in specs)
        scoring = Scoring(specs, kind="reward function" if args.reward else "eval function", names=names,
                          reward=names[0], **reward_limits(args))  # fmt: skip
    source = EarlierRuns(
        inputs, args.dataset, args.repeats, args.only_failed, needs_ground_truth=not args.rubric
    )
    concurrency = args.concurrency or (CONCURRENCY if scoring.judge is None else JUDGE_CONCURRENCY)
    return RunPlan(Rows(inputs[0]), StoredAnswers(source, "regrade", grader, base_url), scoring,
                   concurrency=concurrency, max_concurrency=args.max_concurrency, journal=journal_spec(args),
                   backend=args.backend, ray_address=args.ray_address)  # fmt: skip


async def _regrade(plan: RunPlan, outputs: Outputs, pass_threshold: float | None) -> int:
    from osmosis_ai.cli.progress import run_plan
    from osmosis_ai.report.errors import ReportInputError
    from osmosis_ai.runs.earlier import AnswersError, regrade_results
    from osmosis_ai.runs.executors.stored import EarlierRuns, grader_of

    grader, source = grader_of(plan), plan.executor.source  # type: ignore[attr-defined]
    assert isinstance(source, EarlierRuns)
    inputs, repeats = ", ".join(source.inputs), f" x{source.repeats}" if source.repeats > 1 else ""

    def opening(event: Opened) -> str:
        return f"Regrading {event.rows} answers from {inputs} with {grader}{repeats}; journal {event.journal}"

    labels = {"model": "regrade", "dataset": source.inputs[0], "module": grader}
    try:
        end = await run_plan(
            plan, labels, quiet=outputs.quiet, unit="answer", label="answers", opening=opening
        )
    except (ReportInputError, AnswersError) as exc:  # the inputs named on the command line
        raise CLIError(str(exc)) from None
    results = regrade_results(source.inputs, source.dataset, source.only_failed, end.records, grader,
                              pass_threshold=pass_threshold)  # fmt: skip
    return _render(outputs, grader, results, end)


# -- render ----------------------------------------------------------------------------------------


def _render(outputs: Outputs, grader: str, results: Regraded, end: RunEnd) -> int:
    """The comparison (and the variance), ``-o``, ``--report``, ``--json`` and the exit status."""
    from osmosis_ai.cli.arguments import limit_line, limit_summary
    from osmosis_ai.cli.output import print_json
    from osmosis_ai.cli.output_file import write_output

    records, mine, failed, carried = results.records, results.mine, results.failed, results.carried
    comparison, spread, quiet = results.comparison, results.variance, outputs.quiet
    if outputs.output:
        lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
        write_output(outputs.output, lines, flag="--output")
    if outputs.report or outputs.log_to:
        from osmosis_ai.cli.summary import log_experiment, run_figures, write_report

        run, summary = run_figures(records, outputs.output or "osmosis regrade")
        if outputs.report:
            write_report(outputs.report, [run], summaries=[summary])
        log_experiment(outputs, (run, summary), end)
    scored = len(mine) - len(failed) - len(carried)
    line = f"{len(mine)} answer{'' if len(mine) == 1 else 's'} regraded: {scored} scored"
    if failed:
        line += f", {len(failed)} not scored ({results.refused} refused)"
    if carried:
        line += f", {len(carried)} kept as the earlier run ended (no answer to score)"
    if outputs.json:
        print_json({"grader": grader, "sources": results.sources,
                    "output": outputs.output, "answers": len(records), "regraded": len(mine), "scored": scored,
                    "not_scored": [{"row_index": r["row_index"], "sample_index": r["sample_index"],
                                    "outcome": r["outcome"], "error": r["error"]} for r in failed],
                    "comparison": comparison, "variance": spread,
                    "concurrency": limit_summary(end.limit)})  # fmt: skip
    else:
        for r in failed[:10]:
            say(f"row {r['row_index']} sample {r['sample_index']}: {r['outcome']}: {r['error']}", quiet=quiet)
        for text in comparison_lines(comparison, spread):
            say(text, quiet=quiet)
        if (concurrency := limit_line(end.limit)) is not None:
            say(concurrency, quiet=quiet)
        if outputs.output:
            say(f"Wrote {outputs.output}", quiet=quiet)
        say(line, quiet=False)
    if end.stop is not None:
        raise CLIError(f"the regrade stopped: {end.stop} (run the same command again to resume)")
    if failed:
        raise CLIError(
            f"{len(failed)} of {len(mine)} answers could not be scored (first: {failed[0]['error']})"
        )
    return 0


def _figure(estimate: Mapping[str, float] | None) -> str:
    if estimate is None:
        return "–"
    return f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"


def comparison_lines(comparison: Mapping[str, Any], spread: Mapping[str, Any] | None) -> list[str]:
    """The comparison (and the variance with ``-r``) as lines for the terminal."""
    changed = comparison["changed"]
    share = "" if changed["share"] is None else f" ({changed['share']:.1%})"
    lines = [f"Changed: {changed['count']} of {comparison['compared']} answers scored by both{share}"]
    for c in changed["largest"]:
        lines.append(f"  row {c['row_index']} sample {c['sample_index']}: {c['old']:g} -> {c['new']:g} "
                     f"({c['change']:+g})")  # fmt: skip
    mean = comparison["mean"]
    if mean is not None:
        lines.append(f"Mean: {_figure(mean['old'])} before, {_figure(mean['new'])} now; "
                     f"difference {_figure(mean['difference'])}")  # fmt: skip
        for k, old in comparison["pass_at_k"]["old"].items():
            lines.append(f"pass@{k}: {_figure(old)} before, {_figure(comparison['pass_at_k']['new'][k])} now")
        agreement = comparison["agreement"]
        kappa = agreement["pass_fail"]["kappa"]
        text = f"Agreement (pass at {comparison['pass_threshold']:g}): {agreement['pass_fail']['share']:.1%}"
        text += f", Cohen's kappa {'undefined' if kappa is None else f'{kappa:.3f}'}"
        if agreement["spearman"] is not None:
            text += f"; Spearman's rho {agreement['spearman']:.3f}"
        lines.append(text)
    if spread is not None:
        flips = spread["flips"]
        lines.append(f"Variance over {spread['repeats']} scorings of {spread['answers']} answers: mean std "
                     f"{_figure(spread['mean_std'])}, largest {spread['max_std']:.3f}; pass/fail flips on "
                     f"{flips['count']} ({_figure(flips['share'])})")  # fmt: skip
    return lines
