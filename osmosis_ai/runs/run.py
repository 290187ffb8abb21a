"""Running a :class:`~osmosis_ai.runs.plan.RunPlan`: :func:`run`.

In order: the rows are read and checked (never loaded whole), the executor's user code loaded, the
journal opened by the plan's task id (what it already has is skipped; a changed input is refused by
name), the executor opened and the backend entered (Ray's workers start now), the executor's
preflight (one request per model still needed), and then the items run through :func:`~osmosis_ai.runs.engine.run_items`, each committed to
the journal before it counts. A run that finished every item is marked completed. What happens is
told to ``on_event`` — the events of :mod:`osmosis_ai.runs.events` and each
:class:`~osmosis_ai.runs.result.Result` — and how it ended is the returned :class:`RunEnd`; the
library prints nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.errors import EvaluationError
from osmosis_ai.outcome import Outcome, OutcomeCounts
from osmosis_ai.runs.events import ItemsDone, OnEvent, Opened, Ready, tell
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.journal import PRIMARY, RETRIED_WITH_RETRY_FAILED, runs_again
from osmosis_ai.runs.plan import KeyedSource, Prepared, RowSource, RunPlan

if TYPE_CHECKING:
    from osmosis_ai._pool import Limit
    from osmosis_ai.runs.journal import Journal, SampleRecord


class PlanError(EvaluationError, ValueError):
    """The plan cannot run as given: its rows select nothing, its concurrency is out of range."""


@dataclass
class RunEnd:
    """How a run ended: why it stopped early (``None``: it did not), the journal's status and records
    per model tag (none without a journal), the concurrency limit it ran under, where it ran, and
    its journal."""

    task_id: str
    planned: int
    stop: str | None
    status: str | None
    records: dict[str, list[SampleRecord]]
    limit: Limit
    backend_note: str
    samples_path: Path | None
    journal: Path | None = None
    idle: bool = False
    """Nothing was left to run: every item came from the journal (the outputs of an earlier run of the
    same task are then the same)."""


def open_rows(plan: RunPlan) -> tuple[RowSource, int, int]:
    """The plan's dataset and the rows it selects: ``(rows, rows in the file, rows to run)``. Every
    selected row is read and checked now, one at a time (the file is never loaded whole), so a
    malformed line fails before any paid request. A keyed source may select nothing (a regrade of
    only the failed answers, when none failed): its run has nothing to do."""
    rows = plan.rows
    reader = plan.executor.read_rows(rows)
    total = len(reader)
    selected = max(0, min(total - rows.offset, rows.limit if rows.limit is not None else total))
    if selected == 0 and not isinstance(reader, KeyedSource):
        past = f" (the dataset has {total}, --offset {rows.offset})" if rows.offset else ""
        raise PlanError(f"{reader.file_path}: no rows to run{past}")
    for _ in reader.iter_indexed(selected, rows.offset):
        pass
    return reader, total, selected


def journal_file(plan: RunPlan) -> Path:
    """Where the plan's journal is: the one it names, or the default place for its task id."""
    from osmosis_ai.runs.journal_store import journal_path, journal_root

    assert plan.journal is not None
    if plan.journal.path:
        return Path(plan.journal.path)
    return journal_path(journal_root(), plan.executor.journal_name(), plan.rows.dataset, plan.task_id())


@contextlib.contextmanager
def kept_if_used(journal: Journal) -> Iterator[Journal]:
    """``journal`` for the block, then closed; one this run created and committed nothing to (a
    refused preflight, a mistake found before the first result, Ctrl-C) is deleted with its files,
    so no empty run is left to list or to find."""
    from osmosis_ai.runs.journal_store import journal_root, remove

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


async def run(
    plan: RunPlan,
    on_event: OnEvent,
    *,
    labels: dict[str, Any] | None = None,
    before_start: Callable[[WorkItem], Awaitable[None]] | None = None,
    collect: bool = True,
) -> RunEnd:
    """Run ``plan`` (see the module docstring). ``labels`` are stored in the journal for listings;
    ``before_start(item)`` is awaited before each item starts (a consumer holding items back);
    ``collect=False`` leaves :attr:`RunEnd.records` empty (a caller streaming the journal instead).

    Raises the library's typed errors for what stops a run before its items (a bad dataset, user
    code that does not load, a journal of another configuration, a refused preflight:
    :class:`~osmosis_ai.models.errors.SystemicProviderError`)."""
    from osmosis_ai.models.concurrency import concurrency_limit
    from osmosis_ai.runs.journal import Journal
    from osmosis_ai.runs.journal_store import samples_path

    prepared = plan.executor.prepare(plan)
    reader, total, selected = open_rows(plan)
    try:
        limit = concurrency_limit(
            plan.concurrency, maximum=plan.max_concurrency, base_url=plan.executor.base_url
        )
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    tags = plan.executor.tags
    if isinstance(reader, KeyedSource):
        keys = reader.keys()
    else:
        keys = [
            (row, sample)
            for row in range(plan.rows.offset, plan.rows.offset + selected)
            for sample in range(plan.n)
        ]
    planned = len(keys) * len(tags)
    end = RunEnd(plan.task_id(), planned, None, None, {}, limit, "", None)
    if plan.journal is None:
        await tell(
            on_event,
            Opened(reader.file_path, total, selected, planned, planned, 0, None, None, limit.ceiling),
        )
        await _run_items(plan, prepared, reader, selected, None, tags, limit, on_event, before_start, end)
        await tell(on_event, ItemsDone())
        return end
    file = journal_file(plan)
    journal = Journal.open(
        file,
        prepared.fingerprint(selected),
        fresh=plan.journal.fresh,
        labels=labels,
        samples_path=samples_path(file) if plan.journal.keep_messages else None,
    )
    retry = plan.journal.retry_failed
    with kept_if_used(journal):
        todo = {tag: journal.to_run(keys, retry_failed=retry, model_tag=tag) for tag in tags}
        remaining = sum(len(t) for t in todo.values())
        wanted = set(keys)
        finished = [o for tag in tags for key, o in journal.outcomes(tag) if key in wanted]
        failed = sum(o in RETRIED_WITH_RETRY_FAILED for o in finished)
        kept = OutcomeCounts.of(
            o for o in finished if not runs_again(o, retry_failed=True) and o is not Outcome.COMPLETED
        )
        opened = Opened(reader.file_path, total, selected, planned, remaining, failed, file, journal.set_aside,
                        limit.ceiling, journal.iter_records, kept)  # fmt: skip
        await tell(on_event, opened)
        end.journal, end.idle = file, not remaining
        if remaining:
            left = [tag for tag in tags if todo[tag]]
            await _run_items(
                plan, prepared, reader, selected, journal, left, limit, on_event, before_start, end
            )
        await tell(on_event, ItemsDone())
        records = {tag: journal.records(tag) if collect else {} for tag in tags}
        if end.stop is None and all(not journal.to_run(keys, model_tag=tag) for tag in tags):
            journal.mark("completed")
        end.status = journal.status
    end.records = {tag: [records[tag][key] for key in keys if key in records[tag]] for tag in tags}
    end.samples_path = journal.samples_path
    return end


async def _run_items(
    plan: RunPlan,
    prepared: Prepared,
    reader: RowSource,
    selected: int,
    journal: Journal | None,
    tags: list[str],
    limit: Limit,
    on_event: OnEvent,
    before_start: Callable[[WorkItem], Awaitable[None]] | None,
    end: RunEnd,
) -> None:
    """The backend entered, the executor's preflight, then the items of ``tags``."""
    from osmosis_ai.models.concurrency import AdaptiveLimit, observer_of
    from osmosis_ai.runs.backends.open import open_backend
    from osmosis_ai.runs.backends.ray import WorkerSpec
    from osmosis_ai.runs.engine import run_items
    from osmosis_ai.runs.items import work_items
    from osmosis_ai.runs.pipeline import described

    # Each worker scores in one process of its own unless told otherwise: the workers are the parallelism.
    workers = 1 if plan.scoring.workers is None else plan.scoring.workers
    scoring = dataclasses.replace(plan.scoring, workers=workers)
    spec = WorkerSpec(
        "osmosis_ai.runs.pipeline:on_worker",
        {"plan": dataclasses.replace(plan, scoring=scoring), "tags": tags},
    )
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(limit, AdaptiveLimit):
            stack.push_async_callback(limit.aclose)  # its server-metrics reader
        session = await stack.enter_async_context(prepared.session(plan, tags, observer_of(limit)))

        def local() -> contextlib.AbstractAsyncContextManager[Any]:
            return session.pipeline(limit.ceiling)

        # Entered first: Ray's workers start while the executor's preflight is out.
        backend = await stack.enter_async_context(
            open_backend(
                plan.backend,
                local,
                spec=spec,
                concurrency=limit.ceiling,
                address=plan.ray_address,
                timeout=plan.timeout,
            )
        )
        await session.preflight(on_event)
        lines = described(plan.scoring, plan.timeout)
        process = await backend.ready()
        await tell(on_event, Ready(lines, backend.header()))
        skip: Callable[[WorkItem], bool] | None = None
        if journal is not None:
            retry = plan.journal.retry_failed if plan.journal else False
            finished = {tag: journal.finished_in_order(retry_failed=retry, model_tag=tag) for tag in tags}

            def skip(item: WorkItem) -> bool:
                return finished[item.model_tag](item.row_index, item.sample_index)

        if isinstance(reader, KeyedSource):
            items = reader.items(tags, skip)
        else:
            items = work_items(
                reader.iter_indexed(selected, plan.rows.offset), n=plan.n, tags=tags, skip=skip
            )
        report = await run_items(
            items,
            process,
            concurrency=limit,
            journal=journal,
            keep_messages=bool(plan.journal and plan.journal.keep_messages),
            on_result=on_event,
            before_start=before_start,
        )
        end.backend_note = backend.note()
    if report.stopped_by is not None:
        tag = report.stopped_by.item.model_tag
        end.stop = report.stop_reason if tag == PRIMARY else f"{tag}: {report.stop_reason}"
