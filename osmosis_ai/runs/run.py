"""Running a :class:`~osmosis_ai.runs.plan.RunPlan`: :func:`run`.

In order: the rows are read and checked (never loaded whole), the agent and eval functions loaded,
the journal opened by the plan's task id (what it already has is skipped; a changed input is refused
by name), the backend entered (Ray's workers start now), each model still needed gets one preflight
request, and then the items run through :func:`~osmosis_ai.runs.engine.run_items`, each committed to
the journal before it counts. A run that finished every item is marked completed. What happens is
told to ``on_event`` — :class:`Opened`, :class:`ModelChecked`, :class:`Ready`, and each
:class:`~osmosis_ai.runs.result.Result` — and how it ended is the returned :class:`RunEnd`; the
library prints nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.evaluation.errors import EvaluationError, SystemicProviderError
from osmosis_ai.evaluation.journal import PRIMARY
from osmosis_ai.evaluation.outcome import Outcome
from osmosis_ai.runs.plan import RunPlan
from osmosis_ai.runs.result import Result

if TYPE_CHECKING:
    from osmosis_ai._pool import Limit
    from osmosis_ai.evaluation.dataset import DatasetReader
    from osmosis_ai.evaluation.eval_fn import EvalFnWrapper
    from osmosis_ai.evaluation.journal import Journal, SampleRecord, SetAside


class PlanError(EvaluationError, ValueError):
    """The plan cannot run as given: its rows select nothing, its concurrency is out of range."""


@dataclass(frozen=True)
class Opened:
    """The run's work is known: ``rows`` of the file's ``rows_in_file``; ``planned`` items, of which
    ``remaining`` still run (a resumed run has the rest, ``failed`` of them failed and not run
    again); the journal, and any damaged one it set aside."""

    dataset: Path
    rows_in_file: int
    rows: int
    planned: int
    remaining: int
    failed: int
    journal: Path | None
    set_aside: SetAside | None


@dataclass(frozen=True)
class ModelChecked:
    """A model's preflight is about to go out (``tag`` ``primary`` or ``baseline``)."""

    tag: str
    display_name: str


@dataclass(frozen=True)
class Ready:
    """The items are about to run: how the eval functions score, and the backend's header line."""

    scoring: list[str]
    backend: str | None


Event = Opened | ModelChecked | Ready | Result
OnEvent = Callable[[Event], None]


@dataclass
class RunEnd:
    """How a run ended: why it stopped early (``None``: it did not), the journal's status and records
    per model tag (none without a journal), the concurrency limit it ran under, and where it ran."""

    task_id: str
    planned: int
    stop: str | None
    status: str | None
    records: dict[str, list[SampleRecord]]
    limit: Limit
    backend_note: str
    samples_path: Path | None


def open_rows(plan: RunPlan) -> tuple[DatasetReader, int, int]:
    """The plan's dataset and the rows it selects: ``(reader, rows in the file, rows to run)``. Every
    selected row is read and checked now, one at a time (the file is never loaded whole), so a
    malformed line fails before any paid request."""
    from osmosis_ai.evaluation.dataset import DatasetReader

    rows = plan.rows
    reader = DatasetReader(rows.dataset)
    total = len(reader)
    selected = max(0, min(total - rows.offset, rows.limit if rows.limit is not None else total))
    if selected == 0:
        raise PlanError(
            f"{reader.file_path}: no rows to run (the dataset has {total}, --offset {rows.offset})"
        )
    for _ in reader.iter_rows(limit=selected, offset=rows.offset):
        pass
    return reader, total, selected


def describe(
    plan: RunPlan, agent_loop: Any, scorers: list[EvalFnWrapper], reader: DatasetReader, selected: int
) -> dict[str, Any]:
    """The journal's fingerprint of the plan: its configuration and the digests of its inputs (the
    agent's code, each eval function's source, the dataset's bytes), so an edited input is refused."""
    from osmosis_ai.evaluation.journal import BASELINE, file_digest
    from osmosis_ai.rollout.loading import source_digest

    executor = plan.executor
    primary = executor.model(PRIMARY)
    description: dict[str, Any] = {
        "agent": f"{executor.agent.spec}@{executor.agent.digest(agent_loop)}",
        "eval_fns": [f"{fn.name}@{source_digest(fn.fn)}" for fn in scorers],
        "model": primary.name,
        "base_url": primary.base_url,
        "dataset": file_digest(reader.file_path),
        "rows": [plan.rows.offset, selected],
        "n": plan.n,
        "max_turns": executor.max_turns,
        "completion_params": dict(executor.completion_params),
    }
    if BASELINE in executor.tags:
        baseline = executor.model(BASELINE)
        description["baseline"] = [baseline.name, baseline.base_url]
    return description


def load_scorers(plan: RunPlan) -> list[EvalFnWrapper]:
    """The plan's eval functions, imported and their signatures checked (before any worker starts)."""
    from osmosis_ai.evaluation.eval_fn import EvalFnWrapper
    from osmosis_ai.rollout.loading import load_attribute

    example = "e.g. 'my_evals:exact'"
    return [
        EvalFnWrapper(load_attribute(spec, what=plan.scoring.kind, example=example), spec)
        for spec in plan.scoring.functions
    ]


def journal_file(plan: RunPlan) -> Path:
    """Where the plan's journal is: the one it names, or the default place for its task id."""
    from osmosis_ai.evaluation.journal_store import journal_path, journal_root

    assert plan.journal is not None
    if plan.journal.path:
        return Path(plan.journal.path)
    return journal_path(journal_root(), plan.executor.model().name, plan.rows.dataset, plan.task_id())


@contextlib.contextmanager
def kept_if_used(journal: Journal) -> Iterator[Journal]:
    """``journal`` for the block, then closed; one this run created and committed nothing to (a
    refused preflight, a mistake found before the first result, Ctrl-C) is deleted with its files,
    so no empty run is left to list or to find."""
    from osmosis_ai.evaluation.journal_store import journal_root, remove

    try:
        yield journal
    finally:
        try:
            unused = journal.created and journal.is_empty()
        except sqlite3.Error:  # a journal that cannot say is kept, and the run's own error shown
            unused = False
        journal.close()
        if unused:
            remove(journal.path, journal_root())


async def run(plan: RunPlan, on_event: OnEvent, *, labels: dict[str, Any] | None = None) -> RunEnd:
    """Run ``plan`` (see the module docstring). ``labels`` are stored in the journal for listings.

    Raises the library's typed errors for what stops a run before its items (a bad dataset, an
    agent that does not load, a journal of another configuration, a refused preflight:
    :class:`~osmosis_ai.evaluation.errors.SystemicProviderError`, its message prefixed with the
    model's tag when it is not the primary model)."""
    from osmosis_ai.evaluation.journal import Journal
    from osmosis_ai.evaluation.journal_store import samples_path
    from osmosis_ai.models.concurrency import concurrency_limit

    reader, total, selected = open_rows(plan)
    agent_loop = plan.executor.agent.load()
    scorers = load_scorers(plan)
    limit = concurrency_limit(
        plan.concurrency, maximum=plan.max_concurrency, base_url=plan.executor.model().base_url
    )
    tags = plan.executor.tags
    keys = [
        (row, sample)
        for row in range(plan.rows.offset, plan.rows.offset + selected)
        for sample in range(plan.n)
    ]
    planned = len(keys) * len(tags)
    end = RunEnd(plan.task_id(), planned, None, None, {}, limit, "", None)
    if plan.journal is None:
        on_event(Opened(reader.file_path, total, selected, planned, planned, 0, None, None))
        await _run_items(
            plan, agent_loop, reader, selected, None, {tag: keys for tag in tags}, limit, on_event, end
        )
        return end
    file = journal_file(plan)
    journal = Journal.open(
        file,
        describe(plan, agent_loop, scorers, reader, selected),
        fresh=plan.journal.fresh,
        labels=labels,
        samples_path=samples_path(file) if plan.journal.keep_messages else None,
    )
    retry = plan.journal.retry_failed
    with kept_if_used(journal):
        todo = {tag: journal.to_run(keys, retry_failed=retry, model_tag=tag) for tag in tags}
        remaining = sum(len(t) for t in todo.values())
        wanted = set(keys)
        failed = sum(
            o is Outcome.MODEL_ERROR for tag in tags for key, o in journal.outcomes(tag) if key in wanted
        )
        on_event(
            Opened(reader.file_path, total, selected, planned, remaining, failed, file, journal.set_aside)
        )
        if remaining:
            await _run_items(plan, agent_loop, reader, selected, journal, todo, limit, on_event, end)
        records = {tag: journal.records(tag) for tag in tags}
        if end.stop is None and all(not journal.to_run(keys, model_tag=tag) for tag in tags):
            journal.mark("completed")
        end.status = journal.status
    end.records = {tag: [records[tag][key] for key in keys if key in records[tag]] for tag in tags}
    end.samples_path = journal.samples_path
    return end


async def _run_items(
    plan: RunPlan,
    agent_loop: Any,
    reader: DatasetReader,
    selected: int,
    journal: Journal | None,
    todo: dict[str, list[tuple[int, int]]],
    limit: Limit,
    on_event: OnEvent,
    end: RunEnd,
) -> None:
    """The backend entered, each model with work left preflighted, then the items."""
    from osmosis_ai.models.concurrency import AdaptiveLimit, observer_of
    from osmosis_ai.runs.backends.open import open_backend
    from osmosis_ai.runs.backends.ray import WorkerSpec
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.items import WorkItem, work_items
    from osmosis_ai.runs.pipeline import model_clients, pipeline, runtimes

    tags = [tag for tag, keys in todo.items() if keys]
    clients = model_clients(plan, tags, observer_of(limit))
    # Each Ray worker scores in one process of its own unless told otherwise: the workers are the parallelism.
    worker_plan = dataclasses.replace(
        plan, scoring=dataclasses.replace(plan.scoring, workers=plan.scoring.workers or 1)
    )
    spec = WorkerSpec("osmosis_ai.runs.pipeline:on_worker", {"plan": worker_plan, "tags": tags})
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(limit, AdaptiveLimit):
            stack.push_async_callback(limit.aclose)  # its server-metrics reader
        for client in clients.values():
            await stack.enter_async_context(client)

        def local() -> contextlib.AbstractAsyncContextManager[Any]:
            return pipeline(plan, agent_loop, clients, limit.ceiling)

        # Entered first: Ray's workers start while each model gets its preflight request.
        backend = await stack.enter_async_context(
            open_backend(plan.backend, local, spec=spec, concurrency=limit.ceiling, address=plan.ray_address)
        )
        for tag, client in clients.items():
            on_event(ModelChecked(tag, client.display_name))
            try:
                await client.preflight_check()
            except SystemicProviderError as exc:
                if tag == PRIMARY:
                    raise
                raise SystemicProviderError(f"({tag}) {exc}", kind=exc.kind, status=exc.status) from exc
        scoring = [runtime.describe() for runtime in runtimes(plan.scoring)]
        process = await backend.ready()
        on_event(Ready(scoring, backend.header()))
        skip: Callable[[WorkItem], bool] | None = None
        if journal is not None:
            retry = plan.journal.retry_failed if plan.journal else False
            finished = {tag: journal.finished_in_order(retry_failed=retry, model_tag=tag) for tag in tags}

            def skip(item: WorkItem) -> bool:
                return finished[item.model_tag](item.row_index, item.sample_index)

        report = await run_items(
            work_items(reader.iter_indexed(selected, plan.rows.offset), n=plan.n, tags=tags, skip=skip),
            process,
            concurrency=limit,
            journal=journal,
            keep_messages=bool(plan.journal and plan.journal.keep_messages),
            on_result=on_event,
        )
        end.backend_note = backend.note()
    if report.stopped_by is not None:
        tag = report.stopped_by.item.model_tag
        end.stop = report.stop_reason if tag == PRIMARY else f"{tag}: {report.stop_reason}"
