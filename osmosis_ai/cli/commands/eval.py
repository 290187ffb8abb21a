"""``osmosis eval``: run an agent over a dataset ``--n`` times per row and score each run with eval functions.

Order: the local checks (agent, eval functions, dataset and its first row, the journal), then one
preflight request to the model (and one to ``--baseline-model``), then the samples,
``--batch-size`` at a time. Every finished sample is committed to the run's journal before it
counts, so an interrupted run (Ctrl-C, a crash, ``kill -9``) resumes where it stopped when the same
command is run again; a changed dataset or configuration is refused with the reason (``--fresh``
starts over, keeping the old journal as a backup; ``--retry-failed`` also reruns samples the model
failed). Samples lost to infrastructure are never kept as finished.

The report (:mod:`osmosis_ai.evaluation.summary`) counts the outcomes beside the pass rate and gives
each model its own summary; with a baseline, a paired comparison over the same rows. Failed samples
have no score: they are counted, never scored 0. Exit status by the shared rule
(:func:`osmosis_ai.evaluation.outcome.verdict`), applied to each model. ``osmosis eval cache`` is
:mod:`osmosis_ai.cli.eval.cache`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import (
    absolute_path,
    add_agent_run_arguments,
    add_backend_arguments,
    add_journal_arguments,
    add_log_to_argument,
    add_max_concurrency_argument,
    add_reward_runtime_arguments,
    check_backend_arguments,
    concurrency_value,
    finite_number,
    limit_summary,
    open_dataset,
    run_limit,
    whole_number,
)
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval import cache
from osmosis_ai.cli.loading import agent_spec
from osmosis_ai.cli.output import interrupted, say, setup_logging
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import add_summary_arguments, check_run_outputs, finish_run, show_summary
from osmosis_ai.consts import PACKAGE_VERSION

if TYPE_CHECKING:
    from osmosis_ai._pool import Limit
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.local import LocalModel

DEBUG_DIR = "local_debug"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_agent_run_arguments(parser, unit="run", required=False)
    parser.add_argument("--eval-fn", action="append", metavar="MODULE:FN",
                        help="eval function (repeatable): fn(solution_str, ground_truth, extra_info) "
                        "or fn(messages, ground_truth, metadata)")  # fmt: skip
    parser.add_argument("--n", type=whole_number(1), default=1, help="runs per row (default 1)")
    parser.add_argument("--pass-threshold", type=finite_number(), default=1.0,
                        help="a run passes when its score is at least this (default 1.0)")  # fmt: skip
    parser.add_argument("--batch-size", type=concurrency_value, default=1, metavar="N|auto",
                        help="runs in flight, or 'auto' to follow what the model server can take (default 1)")  # fmt: skip
    add_max_concurrency_argument(parser, "--batch-size")
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
    add_summary_arguments(parser)
    add_log_to_argument(parser)
    cache.add_parser(parser.add_subparsers(dest="eval_command", metavar="{cache}"))


def _samples_file(args: argparse.Namespace) -> str | None:
    """Where ``--log-samples`` appends, when ``--journal`` names the journal it goes beside."""
    from osmosis_ai.evaluation.journal_store import samples_path

    return str(samples_path(Path(args.journal))) if args.journal and args.log_samples else None


def run(args: argparse.Namespace) -> int:
    if getattr(args, "eval_command", None) == "cache":
        return cache.run(args)
    agent = args.module or args.mcp or args.mcp_url
    missing = [flag for flag, value in (("-m/--module (or --mcp/--mcp-url)", agent), ("-d/--dataset", args.dataset),
                                        ("--eval-fn", args.eval_fn)) if not value]  # fmt: skip
    if missing:
        raise CLIError(f"osmosis eval needs {', '.join(missing)} (see osmosis eval --help)")
    if (args.baseline_base_url or args.baseline_api_key) and not args.baseline_model:
        raise CLIError("--baseline-base-url and --baseline-api-key need --baseline-model")
    check_backend_arguments(args)
    setup_logging(logging.DEBUG if args.debug else None)
    args.quiet = args.quiet or args.json
    return run_command(lambda: _eval(args), on_interrupt=lambda: interrupted("run"))


def _task_id(args: argparse.Namespace, dataset: Path) -> str:
    """What names a journal: the configuration as the command line gives it (agent, eval functions,
    models, base URL, dataset path, the rows selected, ``--n``, ``--max-turns``, sampling flags), so
    another flag is another journal, as in 0.2, and shards run side by side; the contents (files,
    sources) are checked against the journal's fingerprint."""
    named: list[Any] = [agent_spec(args), args.eval_fn, args.model, str(dataset.resolve())]
    if args.offset or args.limit is not None:
        named.append([args.offset, args.limit])
    if args.baseline_model:
        named.append([args.baseline_model, args.baseline_base_url])
    named.append([args.base_url, args.n, args.max_turns, _completion_params(args)])
    return hashlib.sha256(json.dumps(named).encode()).hexdigest()[:12]


async def _eval(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.eval.report import check_output_path
    from osmosis_ai.cli.journals import kept_if_used, open_journal, resuming_line
    from osmosis_ai.cli.loading import agent_digest, load_agent, load_attribute, source_digest
    from osmosis_ai.evaluation.eval_fn import EvalFnWrapper
    from osmosis_ai.evaluation.journal import BASELINE, PRIMARY, file_digest
    from osmosis_ai.evaluation.journal_store import journal_path, journal_root, samples_path
    from osmosis_ai.evaluation.outcome import Outcome, plural

    if len(set(args.eval_fn)) != len(args.eval_fn):
        raise CLIError("each --eval-fn may be given once")
    say(f"osmosis-eval v{PACKAGE_VERSION}", quiet=args.quiet)
    output_dir = check_output_path(Path(args.output_path), journal_root()) if args.output_path else None
    check_run_outputs(args)
    agent_loop = load_agent(args)
    eval_fns = [
        EvalFnWrapper(load_attribute(spec, what="eval function", example="e.g. 'my_evals:exact'"), spec)
        for spec in args.eval_fn
    ]
    reader, _, selected = open_dataset(args)
    params = _completion_params(args)
    description = {
        "agent": f"{agent_spec(args)}@{agent_digest(args, agent_loop) or source_digest(agent_loop)}",
        "eval_fns": [f"{fn.name}@{source_digest(fn.fn)}" for fn in eval_fns],
        "model": args.model,
        "base_url": args.base_url,
        "dataset": file_digest(reader.file_path),
        "rows": [args.offset, selected],
        "n": args.n,
        "max_turns": args.max_turns,
        "completion_params": params,
    }
    if args.baseline_model:
        description["baseline"] = [args.baseline_model, args.baseline_base_url]
    task_id = _task_id(args, reader.file_path)
    journal_file = (
        Path(args.journal)
        if args.journal
        else journal_path(journal_root(), args.model, args.dataset, task_id)
    )
    labels = {"model": args.model, "dataset": args.dataset, "module": agent_spec(args),
              "baseline_model": args.baseline_model}  # fmt: skip
    journal = open_journal(journal_file, description, fresh=args.fresh, labels=labels,
                           samples_path=samples_path(journal_file) if args.log_samples else None)  # fmt: skip
    tags = [PRIMARY, BASELINE] if args.baseline_model else [PRIMARY]
    with kept_if_used(journal):
        keys = [
            (row, sample) for row in range(args.offset, args.offset + selected) for sample in range(args.n)
        ]
        wanted = set(keys)
        todo = {tag: journal.to_run(keys, retry_failed=args.retry_failed, model_tag=tag) for tag in tags}
        planned = len(keys) * len(tags)
        remaining = sum(len(t) for t in todo.values())
        models = f" x2 models (baseline {args.baseline_model})" if args.baseline_model else ""
        say(f"Dataset: {reader.file_path} ({selected} {plural('row', selected)} x {args.n} "
            f"{plural('run', args.n)}{models}); journal {journal_file}",
            quiet=args.quiet)  # fmt: skip
        if remaining < planned:
            failed = sum(
                o is Outcome.MODEL_ERROR for tag in tags for key, o in journal.outcomes(tag) if key in wanted
            )
            line = resuming_line(
                planned - remaining, planned, "run", failed=failed, retry_failed=args.retry_failed
            )
            say(line, quiet=args.quiet)
        stop = None
        limit = run_limit(args.batch_size, args, base_url=args.base_url)
        if remaining:
            stop = await _run(
                args, agent_loop, reader.iter_indexed(selected, args.offset), journal, todo, limit,
                done=planned - remaining,
            )  # fmt: skip
        records = {tag: journal.records(tag) for tag in tags}
        finished = all(not journal.to_run(keys, model_tag=tag) for tag in tags)
        if finished and stop is None:
            journal.mark("completed")
        status = journal.status

    picked = {tag: [records[tag][key] for key in keys if key in records[tag]] for tag in tags}
    return _report(args, picked, eval_fns, planned, stop, task_id=task_id, status=status, output_dir=output_dir,
                   samples_file=journal.samples_path, extra={"concurrency": limit_summary(limit)})  # fmt: skip


async def _run(
    args: argparse.Namespace,
    agent_loop: Any,
    rows: Any,
    journal: Any,
    todo: dict[str, list[tuple[int, int]]],
    limit: Limit,
    *,
    done: int,
) -> str | None:
    """Preflight each model, then run the missing samples (here or on Ray workers) with a progress
    bar or plain lines."""
    from osmosis_ai.cli import output
    from osmosis_ai.cli.arguments import limit_line
    from osmosis_ai.cli.backend import run_backend, worker_settings
    from osmosis_ai.cli.eval.samples import progress_reporter, run_samples
    from osmosis_ai.cli.loading import reward_runtime
    from osmosis_ai.evaluation.errors import SystemicProviderError
    from osmosis_ai.evaluation.journal import BASELINE, PRIMARY
    from osmosis_ai.models.concurrency import AdaptiveLimit, observer_of

    if args.backend == "ray" and isinstance(limit, AdaptiveLimit):
        raise CLIError(
            "--batch-size auto follows one process's model calls; give --batch-size N with --backend ray"
        )
    models = _models(args, [tag for tag, keys in todo.items() if keys], observer_of(limit))
    total = done + sum(len(keys) for keys in todo.values())
    remaining = total - done
    bar = not args.quiet and output.wants_progress(None, remaining)
    settings = worker_settings(args, tags=list(models), reward_workers=args.reward_workers or 1)

    def local() -> contextlib.AbstractAsyncContextManager[Pipeline]:
        return _pipeline(args, agent_loop, models, limit.ceiling)

    async with contextlib.AsyncExitStack() as stack:
        if isinstance(limit, AdaptiveLimit):
            stack.push_async_callback(limit.aclose)  # its server-metrics reader
            stack.callback(lambda: say(limit_line(limit) or "", quiet=args.quiet))
        # Entered first: Ray's workers start while each model gets its preflight request.
        backend = await stack.enter_async_context(
            run_backend(
                args, local, factory=f"{__name__}:ray_worker", settings=settings, concurrency=limit.ceiling
            )
        )
        for tag, model in models.items():  # a model with nothing left costs no preflight
            say(
                f"{'Baseline' if tag == BASELINE else 'Model'}: {model.client.display_name}", quiet=args.quiet
            )
            try:
                await model.client.preflight_check()
            except SystemicProviderError as exc:
                if tag == PRIMARY:
                    raise
                raise CLIError(f"(baseline) {exc}") from exc
        for spec in args.eval_fn:
            say(f"Scoring: {reward_runtime(spec, args, kind='eval function').describe()}", quiet=args.quiet)
        pipeline = await backend.ready()
        args.backend_note = backend.note()
        if header := backend.header():
            say(header, quiet=args.quiet)
        with output.progress_bar(remaining, "eval", enabled=bar) as advance:
            report = progress_reporter(total=total, done=done, quiet=args.quiet, tagged=BASELINE in todo,
                                       advance=advance, bar=bar)  # fmt: skip
            return await run_samples(
                pipeline=pipeline, rows=rows, n=args.n, tags=list(models),
                journal=journal, retry_failed=args.retry_failed, batch_size=limit,
                log_samples=args.log_samples, on_sample=report,
            )  # fmt: skip


def _models(args: argparse.Namespace, tags: list[str], observer: Any) -> dict[str, LocalModel]:
    """The model client of each of ``tags`` (``primary``, ``baseline``), its requests labelled."""
    from osmosis_ai.evaluation.journal import BASELINE, PRIMARY
    from osmosis_ai.evaluation.llm_client import ExternalLLMClient
    from osmosis_ai.runs.executors.local import LocalModel

    endpoints = {PRIMARY: (args.model, args.api_key, args.base_url),
                 BASELINE: (args.baseline_model, args.baseline_api_key, args.baseline_base_url)}  # fmt: skip
    models: dict[str, LocalModel] = {}
    for tag in tags:
        model, key, url = endpoints[tag]
        client = ExternalLLMClient(model, api_key=key, api_base=url, observer=observer)
        prefix = "eval" if tag == PRIMARY else "eval-baseline"
        metadata = {"execution_mode": "eval"} | ({} if tag == PRIMARY else {"model_tag": BASELINE})
        models[tag] = LocalModel(client, prefix, metadata)
    return models


@contextlib.asynccontextmanager
async def _pipeline(
    args: argparse.Namespace, agent_loop: Any, models: dict[str, LocalModel], in_flight: int
) -> AsyncIterator[Pipeline]:
    """The agent in-process with ``models``, scored by the eval functions in the reward runtime
    (its worker processes end with the context, however it ends)."""
    from osmosis_ai._usercode import UserThreads
    from osmosis_ai.cli.loading import reward_runtime
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.local import InProcessExecutor
    from osmosis_ai.runs.scorer import Scorer, runtime_function

    params = _completion_params(args)
    # Synchronous agent code gets a thread per sample in flight, its own.
    threads = UserThreads(in_flight, name="osmosis-eval")
    executor = InProcessExecutor(agent_loop, models, max_turns=args.max_turns, completion_params=params,
                                 debug_dir=DEBUG_DIR if args.debug else None, threads=threads)  # fmt: skip
    runtimes = [reward_runtime(spec, args, kind="eval function") for spec in args.eval_fn]
    scorer = Scorer([runtime_function(rt, spec) for rt, spec in zip(runtimes, args.eval_fn, strict=True)])
    async with contextlib.AsyncExitStack() as stack:
        for runtime in runtimes:
            await stack.enter_async_context(runtime)
        yield Pipeline(executor, scorer, timeout=args.timeout)


@contextlib.asynccontextmanager
async def ray_worker(settings: Mapping[str, Any], share: int) -> AsyncIterator[Pipeline]:
    """One Ray worker's pipeline for ``osmosis eval --backend ray``: the same agent, models and eval
    functions as in one process, named by the command's arguments (``settings``), ``share`` in flight."""
    from osmosis_ai.cli.loading import load_agent

    args = argparse.Namespace(**settings)
    async with _pipeline(args, load_agent(args), _models(args, args.tags, None), share) as pipeline:
        yield pipeline


def _completion_params(args: argparse.Namespace) -> dict[str, Any]:
    return {
        k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None
    }


def _report(
    args: argparse.Namespace,
    records: dict[str, list[Any]],
    eval_fns: list[Any],
    planned: int,
    stop: str | None,
    *,
    task_id: str,
    status: str,
    output_dir: Path | None,
    samples_file: Path | None,
    extra: dict[str, Any],
) -> int:
    from osmosis_ai.cli.eval.report import (
        outcome_line,
        print_comparison,
        print_summary,
        run_member,
        write_json,
        write_structured,
    )
    from osmosis_ai.evaluation.journal import BASELINE, PRIMARY, read_samples
    from osmosis_ai.evaluation.outcome import verdict
    from osmosis_ai.evaluation.summary import compare, legacy_document, run_entry, summarize

    # With -q and nothing written, only the outcome line (counts) is shown: the figures, two
    # thousand bootstrap resamples per eval function, would be computed for no one.
    wanted = not args.quiet or bool(args.output or output_dir or args.json or args.report or args.log_to)
    names = [fn.name for fn in eval_fns] if wanted else []
    primary = summarize(records[PRIMARY], names, model=args.model, pass_threshold=args.pass_threshold)
    baseline = comparison = None
    # The summary table below has the primary model's figures; a baseline adds its own and the pairing.
    if BASELINE in records:
        print_summary(primary, quiet=args.quiet, title="Results")
        baseline = summarize(records[BASELINE], names, model=args.baseline_model, model_tag=BASELINE,
                             pass_threshold=args.pass_threshold)  # fmt: skip
        comparison = compare(records[PRIMARY], records[BASELINE], names)
        print_summary(baseline, quiet=args.quiet, title="Baseline")
        print_comparison(comparison, quiet=args.quiet)
    config: dict[str, Any] = {"model": args.model, "n_runs": args.n, "pass_threshold": args.pass_threshold,
                              "eval_fns": list(args.eval_fn)}  # fmt: skip
    if args.baseline_model:
        config["baseline_model"] = args.baseline_model
    everything = [r for tag_records in records.values() for r in tag_records]
    document = legacy_document(config, primary, everything, baseline=baseline, comparison=comparison)
    document["run"] = run_member(args)
    if samples_file is not None and samples_file.exists():
        document["run"]["samples"] = str(samples_file)
    figures = show_summary(args, document, args.output or "osmosis eval")
    say(outcome_line(primary, baseline, planned) + getattr(args, "backend_note", ""), quiet=args.json)
    if args.output:
        write_json(Path(args.output), document, flag="--output")
    if output_dir is not None and status == "completed":
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        structured = {"version": 1, "task_id": task_id, "status": status, "written_at": now,
                      "config": {**config, "dataset": args.dataset, "module": agent_spec(args), "base_url": args.base_url,
                                 "offset": args.offset, "limit": args.limit, "max_turns": args.max_turns},
                      **{k: v for k, v in document.items() if k != "config"},
                      "runs": [{"row_index": r.row_index, **run_entry(r)} for r in everything]}  # fmt: skip
        samples = read_samples(samples_file) if samples_file is not None and samples_file.exists() else None
        path = write_structured(output_dir, model=args.model, dataset=args.dataset, task_id=task_id,
                                document=structured, samples=samples)  # fmt: skip
        say(f"Wrote {path}", quiet=args.quiet)
    finish_run(args, document, args.output or "osmosis eval", figures, extra=extra)
    if stop is not None:
        raise CLIError(
            f"the run stopped: {stop} (finished runs are kept; run the same command again to resume)"
        )
    reasons = [
        verdict(s.counts, max_failure_rate=args.max_failure_rate, unit="run", limit_name="--max-failure-rate")
        for s in (primary, baseline)
        if s is not None
    ]
    reason = reasons[0] or (f"baseline: {reasons[1]}" if len(reasons) > 1 and reasons[1] else None)
    done = primary.counts.total + (baseline.counts.total if baseline else 0)
    if reason is None and done < planned:
        reason = f"{planned - done} of {planned} runs did not finish"
    if reason is not None:
        raise CLIError(reason)
    return 0
