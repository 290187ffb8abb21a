"""``osmosis regrade RESULTS... (--reward MODULE:FN | --eval-fn MODULE:FN ... | --rubric ID [-c CONFIG])``:
score the answers of an earlier run again with another grader, without running the agent or calling
any model (a rubric's judge calls are the only model calls).

The inputs are what ``rollout run -o``, ``test -o``, ``eval -o`` (with its ``--log-samples`` file for
the final messages) and ``eval-rubric -o`` write, told by content (:mod:`osmosis_ai.report.readers`);
files are joined by (row, sample). The ground truth and the other columns the grader sees as
``extra_info`` come from ``-d DATASET`` by row index (the records keep none), or from the record
itself (``eval-rubric``'s input record). The answers go through the run engine: items from the
stored records, the :class:`~osmosis_ai.runs.executors.stored.StoredExecutor` turning each into its
attempt, the one scorer with the reward runtime, the journal (resumable, like every run). An answer
the grader cannot score (no final messages, no ground truth) is refused by row, with the reason; an
answer whose run failed before it was scored keeps its outcome. ``-r K`` scores each answer K times
(journal tags ``repeat-1``...), for the grader's variance; with ``--rubric --cache`` only the first
scoring may come from the judgment cache, never a repeat (a cached judgment would hide the variance).
``--concurrency N`` answers are scored at once; with ``--rubric``, ``--concurrency auto`` follows what
the judge's server can take (:mod:`osmosis_ai.models.concurrency`, bounded by ``--max-concurrency``)
and the summary and ``--json`` say what the limit did.
``--backend ray`` scores on Ray workers (:func:`ray_worker`), each answer sent inside its work item
(:class:`~osmosis_ai.runs.executors.stored.StoredItem`); the driver alone reads the inputs and
journals, so the output is the same as in one process.

The command is parse (:func:`run`) -> engine (:func:`_engine`) -> render (:func:`_render`); ``-o``
writes JSON lines in the engine's record format (what ``rollout run -o`` writes), each with its
final messages and a ``regrade`` object saying where the answer came from, the grader, and the
earlier outcome and reward.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai._pool import FixedLimit, Limit
from osmosis_ai.cli.arguments import (
    absolute_path,
    add_backend_arguments,
    add_journal_arguments,
    add_log_to_argument,
    add_max_concurrency_argument,
    add_reward_runtime_arguments,
    check_backend_arguments,
    concurrency_value,
    finite_number,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import interrupted, say
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import add_summary_arguments

if TYPE_CHECKING:
    from osmosis_ai.models.concurrency import CallObserver
    from osmosis_ai.report.model import Row
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.items import WorkItem
    from osmosis_ai.runs.journal import Journal
    from osmosis_ai.runs.result import Attempt
    from osmosis_ai.runs.scorer import Scorer

# Earlier outcomes whose answer exists: the run finished and only its scoring failed (or, for an
# eval --log-samples file alone, was not recorded). Any other outcome has no answer to score.
SCOREABLE = ("completed", "reward_error", "reward_timeout", "reward_crash", "unknown")
SCORING_FAILED = ("reward_error", "reward_timeout", "reward_crash")
NO_ANSWER = {
    "eval": "eval -o keeps no final messages; give its --log-samples file too",
    "test": "test -o keeps no final messages; regrade the output of eval --log-samples or rollout run -o",
}
# Answers in flight: for a reward, the runtime's workers bound the scoring itself; a judge is a
# provider's rate limit away from failing, so it gets eval-rubric's default.
CONCURRENCY = 64
JUDGE_CONCURRENCY = 8


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
                        help="the run's dataset, for each row's ground_truth and columns (joined by row index)")  # fmt: skip
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
    add_reward_runtime_arguments(parser, what="the grader")
    add_backend_arguments(parser)
    add_summary_arguments(parser)
    add_log_to_argument(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")


def run(args: argparse.Namespace) -> int:
    if (args.config or args.cache) and not args.rubric:
        raise CLIError("-c/--config and --cache go with --rubric")
    if args.concurrency == "auto" and not args.rubric:
        raise CLIError(
            "--concurrency auto follows a judge's server, so it goes with --rubric; "
            "give --concurrency N for --reward/--eval-fn"
        )
    check_backend_arguments(args)
    if args.concurrency == "auto" and args.backend == "ray":
        raise CLIError(
            "--concurrency auto follows one process's judge requests; give --concurrency N with --backend ray"
        )
    args.quiet = args.quiet or args.json
    return run_command(lambda: _regrade(args), on_interrupt=lambda: interrupted("answer"))


@dataclass
class Stored:
    """One answer as the earlier run left it."""

    row: Row
    source: str
    kind: str
    """The command that wrote the source (the report's run kind)."""
    messages: list[dict[str, Any]]
    columns: dict[str, Any] = field(default_factory=dict)
    """What the grader sees as ``extra_info`` (``ground_truth`` among them, when known)."""


@dataclass
class Regrade:
    """What the engine made of the inputs: the stored answers, the grader, and the records."""

    grader: str
    answers: dict[tuple[int, int], Stored]
    selected: list[tuple[int, int]]
    tags: list[str]
    pass_threshold: float
    records: dict[str, dict[tuple[int, int], dict[str, Any]]]
    stop: str | None = None
    rubric: Any = None
    """With ``--rubric``: its :class:`~osmosis_ai.cli.eval_rubric.config.RubricConfig`."""
    limit: Limit = field(default_factory=lambda: FixedLimit(CONCURRENCY))
    """How many answers are scored at once: fixed, or ``auto`` following the judge's server."""


# -- parse -----------------------------------------------------------------------------------------


def _read(inputs: Sequence[Path]) -> tuple[dict[tuple[int, int], Stored], float]:
    """The answers of every input, joined by (row, sample); a samples file adds final messages."""
    from osmosis_ai.report.errors import ReportInputError
    from osmosis_ai.report.readers import read_results

    scored: dict[tuple[int, int], Stored] = {}
    messages: dict[tuple[int, int], list[dict[str, Any]]] = {}
    sample_rows: dict[tuple[int, int], Stored] = {}
    threshold: float | None = None
    for path in inputs:
        try:
            results = read_results(path)
        except ReportInputError as exc:
            raise CLIError(str(exc)) from None
        for row in results.rows:
            if results.kind == "eval samples":
                messages[row.key] = row.trajectory.messages
                sample_rows[row.key] = Stored(row, str(path), results.kind, row.trajectory.messages)
                continue
            if row.key in scored:
                raise CLIError(
                    f"row {row.row} sample {row.sample} is in both {scored[row.key].source} and {path}; "
                    "regrade one run at a time"
                )
            record = row.trajectory.extra.get("input_record")
            columns = {k: v for k, v in record.items() if k != "messages"} if isinstance(record, dict) else {}
            scored[row.key] = Stored(row, str(path), results.kind, row.trajectory.messages, columns)
        if results.kind != "eval samples" and threshold is None:
            threshold = results.pass_threshold
    if not scored:
        scored = sample_rows
    for key, stored in scored.items():
        if not stored.messages and key in messages:
            stored.messages = messages[key]
    if not scored:
        raise CLIError(f"{', '.join(map(str, inputs))}: no answers to regrade")
    return dict(sorted(scored.items())), 1.0 if threshold is None else threshold


def _join_dataset(answers: Mapping[tuple[int, int], Stored], dataset: str) -> str:
    """Each answer's columns from ``dataset``'s row of its index; the dataset's digest."""
    from osmosis_ai.runs.dataset import DatasetReader
    from osmosis_ai.runs.journal import file_digest

    reader = DatasetReader(dataset)
    wanted = {row for row, _ in answers}
    columns: dict[int, dict[str, Any]] = {}
    for index, values in reader.iter_indexed():
        if index in wanted:
            columns[index] = dict(values)
    for (row, _), stored in answers.items():
        if row in columns:
            stored.columns = {**stored.columns, **columns[row]}
    return file_digest(reader.file_path)


# -- engine ----------------------------------------------------------------------------------------


def _outcome(text: str) -> Any:
    from osmosis_ai.outcome import Outcome

    try:
        return Outcome(text)
    except ValueError:
        return Outcome.INFRA_ERROR


def attempt_of(stored: Stored, grader: str, *, needs_ground_truth: bool = True) -> Attempt:
    """The attempt of a stored answer: completed with its final messages when the grader can score
    it; refused (``reward_error``, with the reason) when it lacks what the grader needs; the
    earlier failure, kept, when the run never produced an answer."""
    from osmosis_ai.outcome import Outcome
    from osmosis_ai.runs.result import Attempt

    row = stored.row
    extra = {"final_messages": stored.messages, "regrade": _provenance(stored, grader)}
    if row.outcome not in SCOREABLE:
        return Attempt(_outcome(row.outcome), error=row.error or f"the earlier run ended in {row.outcome}",
                       finish_reason=row.finish_reason, extra=extra)  # fmt: skip
    refusal = None
    if not any(m.get("role") == "assistant" for m in stored.messages):
        refusal = NO_ANSWER.get(stored.kind, "no final assistant message stored")
    elif needs_ground_truth and "ground_truth" not in stored.columns:
        refusal = "no ground_truth stored; give the run's dataset with -d"
    if refusal:
        return Attempt(Outcome.REWARD_ERROR, error=f"refused: {refusal}", extra=extra)
    return Attempt(Outcome.COMPLETED, final_messages=stored.messages, finish_reason=row.finish_reason,
                   extra=extra)  # fmt: skip


def _provenance(stored: Stored, grader: str) -> dict[str, Any]:
    row = stored.row
    return {"source": stored.source, "grader": grader, "previous_outcome": row.outcome,
            "previous_reward": row.scored_value, "previous_scores": dict(row.scores)}  # fmt: skip


def _task_id(args: argparse.Namespace, inputs: Sequence[Path], grader: str) -> str:
    named = [grader, [str(p.resolve()) for p in inputs], args.dataset, args.repeats, args.only_failed]
    return hashlib.sha256(json.dumps(named).encode()).hexdigest()[:12]


async def _regrade(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.arguments import run_limit
    from osmosis_ai.cli.journals import kept_if_used, open_journal, resuming_line
    from osmosis_ai.cli.summary import check_run_outputs
    from osmosis_ai.rollout.loading import load_attribute, source_digest
    from osmosis_ai.runs.journal import PRIMARY, file_digest
    from osmosis_ai.runs.journal_store import journal_path, journal_root

    inputs = [Path(p) for p in args.results]
    check_run_outputs(args)
    rubric = None
    if args.rubric:
        from osmosis_ai.cli.eval_rubric.session import judging_rubric, locate_config
        from osmosis_ai.judge.keys import configured_api_base

        config_path = locate_config(args.config, inputs[0])
        rubric = judging_rubric(config_path, args.rubric)
        specs = [args.rubric]
        grader = f"--rubric {args.rubric} -c {config_path}"
        digests = [f"{args.rubric}@{file_digest(config_path)}"]
    else:
        specs = [args.reward] if args.reward else list(args.eval_fn)
        if len(set(specs)) != len(specs):
            raise CLIError("each --eval-fn may be given once")
        kind = "reward function" if args.reward else "eval function"
        functions = [load_attribute(spec, what=kind, example="e.g. 'my_rewards:exact'") for spec in specs]
        grader = " ".join(f"{'--reward' if args.reward else '--eval-fn'} {spec}" for spec in specs)
        digests = [f"{spec}@{source_digest(fn)}" for spec, fn in zip(specs, functions, strict=True)]
    default = CONCURRENCY if rubric is None else JUDGE_CONCURRENCY
    base_url = None if rubric is None else configured_api_base(rubric.model_info)
    limit = run_limit(args.concurrency or default, args, base_url=base_url)
    answers, threshold = _read(inputs)
    description: dict[str, Any] = {
        "grader": digests,
        "inputs": [file_digest(p) for p in inputs],
        "dataset": _join_dataset(answers, args.dataset) if args.dataset else None,
        "repeats": args.repeats,
        "only_failed": args.only_failed,
    }
    selected = [k for k, s in answers.items() if not args.only_failed or s.row.outcome in SCORING_FAILED]
    tags = [PRIMARY] + [f"repeat-{i}" for i in range(1, args.repeats)]
    task_id = _task_id(args, inputs, grader)
    journal_file = (
        Path(args.journal) if args.journal else journal_path(journal_root(), "regrade", inputs[0], task_id)
    )
    labels = {"model": "regrade", "dataset": str(inputs[0]), "module": grader}
    journal = open_journal(journal_file, description, fresh=args.fresh, labels=labels)
    state = Regrade(grader, answers, selected, tags, args.pass_threshold or threshold, records={},
                    rubric=rubric, limit=limit)  # fmt: skip
    with kept_if_used(journal):
        todo = {tag: journal.to_run(selected, retry_failed=args.retry_failed, model_tag=tag) for tag in tags}
        planned = len(selected) * len(tags)
        remaining = sum(len(keys) for keys in todo.values())
        say(f"Regrading {len(selected)} answers from {', '.join(map(str, inputs))} with {grader}"
            f"{f' x{args.repeats}' if args.repeats > 1 else ''}; journal {journal_file}", quiet=args.quiet)  # fmt: skip
        if remaining < planned:
            say(resuming_line(planned - remaining, planned, "answer", failed=0, retry_failed=False),
                quiet=args.quiet)  # fmt: skip
        if remaining:
            state.stop = await _engine(args, specs, state, todo, journal)
        state.records = {tag: {k: r.data for k, r in journal.records(tag).items()} for tag in tags}
        if state.stop is None and all(not journal.to_run(selected, model_tag=tag) for tag in tags):
            journal.mark("completed")
    return _render(args, state)


async def _engine(
    args: argparse.Namespace,
    specs: Sequence[str],
    state: Regrade,
    todo: Mapping[str, Sequence[tuple[int, int]]],
    journal: Journal,
) -> str | None:
    """Score the answers still to do through the run engine (stored executor, scorer, journal): here,
    or on Ray workers that each score with a grader of their own, the answers sent in the items."""
    from osmosis_ai.cli.backend import run_backend, worker_settings
    from osmosis_ai.models.concurrency import AdaptiveLimit, observer_of
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.executors.stored import StoredItem

    limit = state.limit
    pending = {tag: set(keys) for tag, keys in todo.items()}
    needs_ground_truth = state.rubric is None

    def items() -> Iterator[StoredItem]:
        for key in state.selected:
            stored = state.answers[key]
            for tag in state.tags:
                if key in pending[tag]:
                    answer = attempt_of(stored, state.grader, needs_ground_truth=needs_ground_truth)
                    yield StoredItem(key[0], key[1], stored.columns, tag, answer=answer)

    def local() -> contextlib.AbstractAsyncContextManager[Pipeline]:
        scorer, runtimes = _scoring(args, specs, state.rubric, observer=observer_of(limit))
        if state.rubric is not None:
            say(f"Scoring: the judge of rubric {state.rubric.rubric_id!r}", quiet=args.quiet)
        for runtime in runtimes:
            say(f"Scoring: {runtime.describe()}", quiet=args.quiet)
        return _pipeline(scorer, runtimes)

    rubric = None if state.rubric is None else dataclasses.asdict(state.rubric)
    # A Ray worker has one CPU: one reward process of its own unless told (0: in the worker's process).
    reward_workers = 1 if args.reward_workers is None else args.reward_workers
    settings = worker_settings(args, specs=list(specs), rubric_config=rubric, reward_workers=reward_workers)
    backend_context = run_backend(args, local, factory=f"{__name__}:ray_worker", settings=settings,
                                  concurrency=limit.ceiling)  # fmt: skip
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(limit, AdaptiveLimit):
            stack.push_async_callback(limit.aclose)  # its server-metrics reader
        backend = await stack.enter_async_context(backend_context)
        process = await backend.ready()
        if header := backend.header():
            say(header, quiet=args.quiet)
        report = await run_items(items(), process, concurrency=limit, journal=journal)
    return report.stop_reason


def _scoring(
    args: argparse.Namespace, specs: Sequence[str], rubric: Any, *, observer: CallObserver | None = None
) -> tuple[Scorer, list[Any]]:
    """The grader's scorer, and the reward runtimes it scores in (none for a rubric's judge, whose
    requests ``observer`` hears)."""
    from osmosis_ai.cli.loading import reward_runtime
    from osmosis_ai.runs.scorer import Scorer, runtime_function

    if rubric is not None:
        return Scorer([judge_function(rubric, cache=args.cache, observer=observer)], reward="score"), []
    kind = "reward function" if args.reward else "eval function"
    names = ["reward"] if args.reward else list(specs)
    runtimes = [reward_runtime(spec, args, kind=kind) for spec in specs]
    functions = [runtime_function(rt, name) for rt, name in zip(runtimes, names, strict=True)]
    return Scorer(functions, reward=names[0]), runtimes


@contextlib.asynccontextmanager
async def _pipeline(scorer: Scorer, runtimes: Sequence[Any]) -> AsyncIterator[Pipeline]:
    """The carried answers scored by ``scorer``; the runtimes' worker processes end with the context."""
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.stored import StoredExecutor, carried

    async with contextlib.AsyncExitStack() as stack:
        for runtime in runtimes:
            await stack.enter_async_context(runtime)
        yield Pipeline(StoredExecutor(carried), scorer)


@contextlib.asynccontextmanager
async def ray_worker(settings: Mapping[str, Any], share: int) -> AsyncIterator[Pipeline]:
    """One Ray worker's pipeline for ``osmosis regrade --backend ray``: the same grader, named by the
    command's arguments (``settings``), in a reward runtime of the worker's own (or the rubric's
    judge, its config sent as data); the answers come in the items."""
    from osmosis_ai.cli.eval_rubric.config import RubricConfig

    args = argparse.Namespace(**settings)
    rubric = None if args.rubric_config is None else RubricConfig(**args.rubric_config)
    scorer, runtimes = _scoring(args, args.specs, rubric)
    async with _pipeline(scorer, runtimes) as pipeline:
        yield pipeline


def judge_function(
    config: Any,
    *,
    cache: bool,
    observer: CallObserver | None = None,
    ground_truth: Callable[[WorkItem, Attempt], Any] | None = None,
) -> Any:
    """A score function judging the last assistant message with the rubric ``config``, through
    eval-rubric's engine (its outcomes: a provider failure is ``infra_error``/``timeout``, an unusable
    answer ``model_error``). Only the first scoring may use the judgment cache, never a repeat.
    ``observer`` (an ``auto`` concurrency limit) hears how each judge request ended;
    ``ground_truth(item, attempt)`` finds the answer's ground truth (default: the row's
    ``ground_truth`` column)."""
    from osmosis_ai._usercode import UserThreads
    from osmosis_ai.cli.eval_rubric.dataset import RubricRecord
    from osmosis_ai.cli.eval_rubric.engine import RubricEvaluationEngine
    from osmosis_ai.outcome import Outcome
    from osmosis_ai.runs.journal import PRIMARY
    from osmosis_ai.runs.scorer import ScoreFailure, ScoreFn

    first = RubricEvaluationEngine(cache=cache or None, progress=False, observer=observer)
    repeats = RubricEvaluationEngine(progress=False, observer=observer)

    async def score(item: WorkItem, attempt: Attempt, threads: UserThreads | None) -> float:
        answer = next(m for m in reversed(attempt.final_messages) if m.get("role") == "assistant")
        truth = item.row.get("ground_truth") if ground_truth is None else ground_truth(item, attempt)
        record = RubricRecord(
            line_number=item.row_index + 1, payload=dict(item.row), solution_str=str(answer.get("content") or ""),
            rubric_id=config.rubric_id, conversation_id=None, ground_truth=None if truth is None else str(truth),
            original_input=None, metadata=None, extra_info=None, score_min=None, score_max=None,
        )  # fmt: skip
        engine = first if item.model_tag == PRIMARY else repeats
        judged = await engine.run_once(config, record, item.sample_index + 1)
        if judged.outcome is not Outcome.COMPLETED or judged.score is None:
            outcome = Outcome.REWARD_ERROR if judged.outcome is Outcome.COMPLETED else judged.outcome
            raise ScoreFailure(outcome, judged.error or "the judge returned no score")
        return judged.score

    return ScoreFn("score", score)


# -- render ----------------------------------------------------------------------------------------


def _output_records(state: Regrade) -> list[dict[str, Any]]:
    """One record per answer in (row, sample) order: the first scoring's, with every repeat's
    reward; an answer left out by ``--only-failed`` as the earlier run scored it."""
    from osmosis_ai.runs.items import WorkItem
    from osmosis_ai.runs.result import Result

    primary, *repeats = state.tags
    chosen = set(state.selected)
    out = []
    for key, stored in state.answers.items():
        if key in chosen:
            record = state.records[primary].get(key)
            if record is None:
                continue  # the run stopped before this answer
            if repeats:
                found = [state.records[tag].get(key) for tag in state.tags]
                record["regrade"]["repeats"] = [r.get("reward") if r else None for r in found]
        else:
            attempt = attempt_of(stored, state.grader)
            attempt.extra["regrade"]["kept"] = True
            item = WorkItem(key[0], key[1], stored.columns)
            kept = Result(item, attempt, _outcome(stored.row.outcome), reward=stored.row.scored_value,
                          scores=dict(stored.row.scores))  # fmt: skip
            record = kept.record()
        out.append(record)
    return out


def _pairs(state: Regrade, records: Sequence[dict[str, Any]]) -> list[Any]:
    from osmosis_ai.runs.regrade import Pair

    pairs = []
    for record in records:
        regrade = record["regrade"]
        new = record.get("reward") if record.get("outcome") == "completed" else None
        repeats = tuple(r for r in regrade.get("repeats") or () if r is not None)
        pairs.append(
            Pair(record["row_index"], record["sample_index"], regrade["previous_reward"], new, repeats)
        )
    return pairs


def _render(args: argparse.Namespace, state: Regrade) -> int:
    from osmosis_ai.cli.arguments import limit_line, limit_summary
    from osmosis_ai.cli.output import print_json
    from osmosis_ai.cli.output_file import write_output
    from osmosis_ai.runs.regrade import compare, variance

    records = _output_records(state)
    pairs = _pairs(state, records)
    comparison = compare(pairs, pass_threshold=state.pass_threshold)
    spread = variance(pairs, pass_threshold=state.pass_threshold)
    chosen = set(state.selected)
    mine = [r for r in records if (r["row_index"], r["sample_index"]) in chosen]
    carried = [r for r in mine if r["regrade"]["previous_outcome"] not in SCOREABLE]
    refused = [r for r in mine if str(r.get("error") or "").startswith("refused: ")]
    failed = [r for r in mine if r["outcome"] != "completed" and r not in carried]
    if args.output:
        lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
        write_output(args.output, lines, flag="--output")
    if args.report or args.log_to:
        from osmosis_ai.cli.summary import log_experiment, run_figures, write_report

        run, summary = run_figures(records, args.output or "osmosis regrade")
        if args.report:
            write_report(args.report, [run], summaries=[summary])
        log_experiment(args, (run, summary))
    scored = len(mine) - len(failed) - len(carried)
    line = f"{len(mine)} answer{'' if len(mine) == 1 else 's'} regraded: {scored} scored"
    if failed:
        line += f", {len(failed)} not scored ({len(refused)} refused)"
    if carried:
        line += f", {len(carried)} kept as the earlier run ended (no answer to score)"
    if args.json:
        print_json({"grader": state.grader, "sources": sorted({s.source for s in state.answers.values()}),
                    "output": args.output, "answers": len(records), "regraded": len(mine), "scored": scored,
                    "not_scored": [{"row_index": r["row_index"], "sample_index": r["sample_index"],
                                    "outcome": r["outcome"], "error": r["error"]} for r in failed],
                    "comparison": comparison, "variance": spread,
                    "concurrency": limit_summary(state.limit)})  # fmt: skip
    else:
        for r in failed[:10]:
            say(
                f"row {r['row_index']} sample {r['sample_index']}: {r['outcome']}: {r['error']}",
                quiet=args.quiet,
            )
        for text in comparison_lines(comparison, spread):
            say(text, quiet=args.quiet)
        if (concurrency := limit_line(state.limit)) is not None:
            say(concurrency, quiet=args.quiet)
        if args.output:
            say(f"Wrote {args.output}", quiet=args.quiet)
        say(line, quiet=False)
    if state.stop is not None:
        raise CLIError(f"the regrade stopped: {state.stop} (run the same command again to resume)")
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
