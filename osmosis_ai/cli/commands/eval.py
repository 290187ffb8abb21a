"""``osmosis eval``: run an agent over a dataset ``--n`` times per row and score each run with eval functions.

Order: the local checks (agent, eval functions, dataset and its first row, the journal), then one
preflight request to the model, then the samples, ``--batch-size`` at a time. Every finished sample
is committed to the run's journal before it counts, so an interrupted run (Ctrl-C, a crash,
``kill -9``) resumes where it stopped when the same command is run again; a changed dataset or
configuration is refused with the reason (``--fresh`` starts over, keeping the old journal as a
backup; ``--retry-failed`` also reruns samples the model failed). Samples lost to infrastructure
are never kept as finished.

The report counts the outcomes beside the pass rate and gives, per eval function, the mean score of
the completed samples with a bootstrap interval over rows and the unbiased pass@k for every
``k <= n`` (a sample passes when its score is at least ``--pass-threshold``). Failed samples have no
score: they are counted, never scored 0. Exit status by the shared rule
(:func:`osmosis_ai.evaluation.outcome.verdict`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any

from osmosis_ai.cli.arguments import finite_number, fraction, whole_number
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import say, setup_logging
from osmosis_ai.cli.summary import add_summary_arguments, finish_run

JOURNAL_ENV = "OSMOSIS_CACHE_DIR"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", "--module", "--agent", dest="module", required=True, metavar="MODULE:ATTR",
                        help="agent loop to evaluate")  # fmt: skip
    parser.add_argument("-d", "--dataset", required=True, help="dataset (.jsonl, .csv, .parquet)")
    parser.add_argument("--eval-fn", action="append", required=True, metavar="MODULE:FN",
                        help="eval function (repeatable): fn(solution_str, ground_truth, extra_info) "
                        "or fn(messages, ground_truth, metadata)")  # fmt: skip
    parser.add_argument("--model", default="gpt-5-mini", help="LiteLLM model (default gpt-5-mini)")
    parser.add_argument("--base-url", help="OpenAI-compatible base URL serving --model")
    parser.add_argument("--api-key", help="API key (default: the provider's environment variable)")
    parser.add_argument("--n", type=whole_number(1), default=1, help="runs per row (default 1)")
    parser.add_argument("--pass-threshold", type=finite_number(), default=1.0,
                        help="a run passes when its score is at least this (default 1.0)")  # fmt: skip
    parser.add_argument("--batch-size", type=whole_number(1), default=1, help="runs in flight (default 1)")
    parser.add_argument("--limit", type=whole_number(1), help="rows to run (default: all)")
    parser.add_argument("--offset", type=whole_number(0), default=0, help="rows to skip first")
    parser.add_argument("--max-turns", type=whole_number(1), default=10, help="max_turns of each request")
    parser.add_argument("--max-tokens", type=whole_number(1), help="completion_params.max_tokens")
    parser.add_argument("--temperature", type=finite_number(), help="completion_params.temperature")
    parser.add_argument("--max-failure-rate", type=fraction, default=0.0, metavar="FRACTION",
                        help="share of runs (0-1) that may fail without failing the command (default 0)")  # fmt: skip
    parser.add_argument("--journal", metavar="FILE", help="journal file (default: one per configuration "
                        "under $OSMOSIS_CACHE_DIR/eval or ~/.cache/osmosis/eval)")  # fmt: skip
    parser.add_argument(
        "--fresh", action="store_true", help="start over; the old journal is kept as a backup"
    )
    parser.add_argument("--retry-failed", action="store_true", help="also rerun runs the model failed")
    parser.add_argument("-o", "--output", metavar="FILE.json", help="write the report as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")
    parser.add_argument("--debug", action="store_true", help="show library log messages")
    add_summary_arguments(parser)


def run(args: argparse.Namespace) -> int:
    setup_logging(logging.DEBUG if args.debug else None)
    args.quiet = args.quiet or args.json
    return asyncio.run(_eval(args))


def _source_digest(obj: Any) -> str:
    """A digest of the code behind ``obj`` (its module's file), so an edited agent or eval fn is noticed."""
    target = inspect.unwrap(obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj))
    try:
        source = Path(inspect.getfile(target)).read_bytes()
    except (OSError, TypeError) as exc:
        raise CLIError(f"cannot read the source of {obj!r} to fingerprint the run: {exc}") from exc
    return hashlib.sha256(source).hexdigest()


def _journal_root() -> Path:
    if os.environ.get(JOURNAL_ENV):
        return Path(os.environ[JOURNAL_ENV]) / "eval"
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "osmosis" / "eval"
    return Path.home() / ".cache" / "osmosis" / "eval"


async def _eval(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.loading import load_agent_loop, load_attribute
    from osmosis_ai.evaluation.dataset import DatasetReader
    from osmosis_ai.evaluation.eval_fn import EvalFnWrapper
    from osmosis_ai.evaluation.journal import Journal, file_digest

    if len(set(args.eval_fn)) != len(args.eval_fn):
        raise CLIError("each --eval-fn may be given once")
    agent_loop = load_agent_loop(args.module)
    eval_fns = [
        EvalFnWrapper(load_attribute(spec, what="eval function", example="e.g. 'my_evals:exact'"), spec)
        for spec in args.eval_fn
    ]
    reader = DatasetReader(args.dataset)
    total = len(reader)
    selected = max(0, min(total - args.offset, args.limit if args.limit is not None else total))
    if selected == 0:
        raise CLIError(
            f"{reader.file_path}: no rows to run (the dataset has {total}, --offset {args.offset})"
        )
    reader.read(limit=1, offset=args.offset)  # a dataset in the wrong shape fails before any paid request
    params = {
        k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None
    }
    description = {
        "agent": f"{args.module}@{_source_digest(agent_loop)}",
        "eval_fns": [f"{fn.name}@{_source_digest(fn.fn)}" for fn in eval_fns],
        "model": args.model,
        "base_url": args.base_url,
        "dataset": file_digest(reader.file_path),
        "rows": [args.offset, selected],
        "n": args.n,
        "max_turns": args.max_turns,
        "completion_params": params,
    }
    identity = hashlib.sha256(
        json.dumps([args.module, args.eval_fn, args.model, str(reader.file_path.resolve())]).encode()
    ).hexdigest()[:16]
    journal_path = Path(args.journal) if args.journal else _journal_root() / f"{identity}.sqlite"
    journal = Journal.open(journal_path, description, fresh=args.fresh)
    with contextlib.closing(journal):
        keys = [
            (row, sample) for row in range(args.offset, args.offset + selected) for sample in range(args.n)
        ]
        todo = journal.to_run(keys, retry_failed=args.retry_failed)
        done_before = len(keys) - len(todo)
        say(
            quiet=args.quiet,
            line=f"Dataset: {reader.file_path} ({selected} rows x {args.n} runs); journal {journal_path}",
        )
        if done_before:
            say(quiet=args.quiet, line=f"Resuming: {done_before} of {len(keys)} runs already finished")
        if todo:
            stop = await _run_samples(args, agent_loop, eval_fns, reader, journal, todo, params)
        else:
            stop = None
        recorded = journal.records()
        records = [recorded[key] for key in keys if key in recorded]
    return _report(args, records, eval_fns, len(keys), stop)


async def _run_samples(
    args: argparse.Namespace,
    agent_loop: Any,
    eval_fns: list[Any],
    reader: Any,
    journal: Any,
    todo: list[tuple[int, int]],
    params: dict[str, Any],
) -> str | None:
    """Run the ``todo`` samples, ``--batch-size`` in flight; returns why the run stopped early, if it did."""
    from osmosis_ai.cli import output
    from osmosis_ai.evaluation.errors import SystemicProviderError
    from osmosis_ai.evaluation.journal import SampleRecord
    from osmosis_ai.evaluation.llm_client import ExternalLLMClient
    from osmosis_ai.evaluation.outcome import Outcome
    from osmosis_ai.evaluation.runner import LocalRunner

    wanted: dict[int, list[int]] = {}
    for row, sample in todo:
        wanted.setdefault(row, []).append(sample)
    client = ExternalLLMClient(args.model, api_key=args.api_key, api_base=args.base_url)
    runner = LocalRunner(
        agent_loop,
        client,
        rollout_id_prefix="eval",
        request_metadata={"execution_mode": "eval"},
        max_turns=args.max_turns,
        completion_params=params,
    )
    slots = asyncio.Semaphore(args.batch_size)
    stopped: list[str] = []

    async def one(row_index: int, row: dict[str, Any], sample: int) -> None:
        try:
            if stopped:
                return
            try:
                result = await runner.run_row(row, row_index)
            except SystemicProviderError as exc:
                stopped.append(str(exc))
                return  # never journaled: a rerun after the fix runs it
            data: dict[str, Any] = result.to_dict()
            data["scores"], data["eval_errors"] = {}, {}
            outcome = result.outcome
            if outcome is Outcome.COMPLETED:
                for fn in eval_fns:
                    try:
                        data["scores"][fn.name] = await fn(result.final_messages, row["ground_truth"], row)
                    except Exception as exc:  # the user's scorer: this sample's reward_error, not a 0
                        data["eval_errors"][fn.name] = f"{type(exc).__name__}: {exc}"
                if data["eval_errors"]:
                    outcome = Outcome.REWARD_ERROR
            await journal.arecord(SampleRecord(row_index, sample, outcome, data))
            advance()
        finally:
            slots.release()

    async with client:
        await client.preflight_check()
        with output.progress_bar(
            len(todo), "eval", enabled=output.wants_progress(None if not args.quiet else False, len(todo))
        ) as advance:
            tasks: set[asyncio.Task[None]] = set()
            for row_index, row in reader.iter_indexed(len(range(min(wanted), max(wanted) + 1)), min(wanted)):
                for sample in wanted.get(row_index, []):
                    await slots.acquire()
                    if stopped:
                        slots.release()
                        break
                    task = asyncio.create_task(one(row_index, row, sample))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if stopped:
                    break
            if tasks:
                await asyncio.gather(*tasks)
    return stopped[0] if stopped else None


def _report(
    args: argparse.Namespace, records: list[Any], eval_fns: list[Any], planned: int, stop: str | None
) -> int:
    from osmosis_ai.evaluation.outcome import Outcome, OutcomeCounts, verdict
    from osmosis_ai.evaluation.statistics import bootstrap_interval, pass_at_k_table

    counts = OutcomeCounts.of(r.outcome for r in records)
    summaries: dict[str, Any] = {}
    for fn in eval_fns:
        by_row: dict[int, list[float]] = {}
        for record in records:
            if record.outcome is Outcome.COMPLETED:
                by_row.setdefault(record.row_index, []).append(record.data["scores"][fn.name])
        if not by_row:
            summaries[fn.name] = None
            continue
        row_means = [sum(v) / len(v) for v in by_row.values()]
        mean = bootstrap_interval(row_means)
        passes = [[score >= args.pass_threshold for score in scores] for scores in by_row.values()]
        table = pass_at_k_table(passes)
        summaries[fn.name] = {
            "mean": mean.to_dict(),
            "pass_at_k": {str(k): e.to_dict() for k, e in table.items()},
            "rows": len(by_row),
            "runs": sum(len(v) for v in by_row.values()),
        }
        say(
            f"{fn.name}: mean {mean.value:.3f} [{mean.low:.3f}, {mean.high:.3f}] over {len(by_row)} rows",
            quiet=args.quiet,
        )
        for k, e in table.items():
            say(quiet=args.quiet, line=f"  pass@{k}: {e.value:.3f} [{e.low:.3f}, {e.high:.3f}]")
    line = counts.describe("run")
    if counts.total < planned:
        line += f"; {planned - counts.total} of {planned} not run"
    say(line, quiet=args.json)
    if args.output or args.report or args.json:
        document = {
            "model": args.model,
            "n": args.n,
            "pass_threshold": args.pass_threshold,
            "outcomes": counts.to_dict(),
            "planned_runs": planned,
            "stopped_early": stop is not None,
            "stop_reason": stop,
            "eval_functions": summaries,
            "runs": [{"row_index": r.row_index, "run_index": r.sample_index, "outcome": r.outcome.value, **r.data}
                     for r in records],
        }  # fmt: skip
        path = Path(args.output or "")
        try:
            if args.output:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CLIError(f"cannot write --output {path}: {exc.strerror or exc}") from exc
        finish_run(args, document, args.output or "osmosis eval")
    if stop is not None:
        raise CLIError(
            f"the run stopped: {stop} (finished runs are kept; run the same command again to resume)"
        )
    reason = verdict(
        counts, max_failure_rate=args.max_failure_rate, unit="run", limit_name="--max-failure-rate"
    )
    if reason is None and counts.total < planned:
        reason = f"{planned - counts.total} of {planned} runs did not finish"
    if reason is not None:
        raise CLIError(reason)
    return 0
