"""A rollout run streamed (``osmosis rollout run``, ``osmosis eval run``): :class:`RolloutStream`.

Each finished rollout is counted into a :class:`~osmosis_ai.traingate.report.RunTally` and written
to the records file in dataset order as it ends (:class:`~osmosis_ai.traingate.report.OrderedRecordWriter`),
and the rollouts a resumed run's journal already has are counted and written in their places too,
so the run keeps no rollout and its memory follows its concurrency, not its dataset. The run's
figures, as reading its records file would give them: :func:`figures`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from osmosis_ai.runs.events import ItemsDone, OnEvent, Opened, Ready, tell
from osmosis_ai.runs.journal import runs_again
from osmosis_ai.runs.result import Result

if TYPE_CHECKING:
    from osmosis_ai.report.figures import Summary
    from osmosis_ai.report.model import Run
    from osmosis_ai.runs.items import WorkItem
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.run import RunEnd
    from osmosis_ai.traingate.report import OrderedRecordWriter, RunTally


def _record_window(concurrency: int) -> int:
    """How many finished records the in-order writer may hold back: enough that one slow rollout
    rarely pauses the others, few enough that memory stays bounded."""
    return max(4 * concurrency, 256)


class RolloutStream:
    """Runs ``plan`` (its executor one model's rollout server) into ``tally``: ``output`` (opened by
    ``opener``) gets every record in dataset order, ``on_record(record)`` is called with each (from
    a worker thread for the rollouts this run ends), and ``keep_all`` keeps every record in the tally
    (a caller that reads them back instead of a file). ``wall_s`` is the items' wall time."""

    def __init__(
        self,
        plan: RunPlan,
        tally: RunTally,
        *,
        output: str | None = None,
        opener: Callable[[Path], TextIO] | None = None,
        on_record: Callable[[dict[str, Any]], object] | None = None,
        keep_all: bool = False,
    ) -> None:
        self.plan, self.tally, self.output, self.opener = plan, tally, output, opener
        self.on_record, self.keep_all = on_record, keep_all
        self.model: str = plan.executor.model.name  # type: ignore[attr-defined]
        self.writer: OrderedRecordWriter | None = None
        self.wall_s = 0.0
        self._planned = 0
        self._first = plan.rows.offset * plan.n  # the writer numbers the selected rollouts from 0

    def _sequence(self, item: WorkItem) -> int:
        return item.row_index * self.plan.n + item.sample_index - self._first

    async def _admit(self, item: WorkItem) -> None:
        if self.writer is not None:
            await self.writer.admit(self._sequence(item))

    async def run(self, on_event: OnEvent, *, labels: dict[str, Any]) -> RunEnd:
        """:func:`osmosis_ai.runs.run.run` of the plan; ``on_event`` hears every event once the
        stream has counted it (:class:`~osmosis_ai.runs.events.Ready`: before the file is opened)."""
        from osmosis_ai.runs.run import run

        with contextlib.ExitStack() as stack:
            started, entered = time.perf_counter(), False

            async def step(event: Any) -> None:
                nonlocal started, entered
                if isinstance(event, Result):
                    await self._finished(event)
                elif isinstance(event, Opened):
                    self._opened(event)
                elif isinstance(event, Ready):
                    await tell(on_event, event)
                    if self.writer is not None:  # opened once the preflight passed
                        stack.enter_context(self.writer)
                        entered = True
                    started = time.perf_counter()
                    return
                elif isinstance(event, ItemsDone):
                    self.wall_s = time.perf_counter() - started
                    if self.writer is not None:
                        if not entered:  # nothing was left to run: the journal's records only
                            stack.enter_context(self.writer)
                        await self.writer.complete(self._planned)
                await tell(on_event, event)

            return await run(self.plan, step, labels=labels, before_start=self._admit, collect=False)

    async def _finished(self, result: Result) -> None:
        record = result.record()  # committed to the journal by the engine before this
        record["model"] = self.model  # what the report prices the tokens with
        self.tally.add_record(record)
        if self.on_record is not None:  # off the loop the rollouts share: a file may be fsynced
            await asyncio.to_thread(self.on_record, record)
        if self.writer is not None:
            # Written as soon as every earlier rollout is, in dataset order, by a writer thread.
            await self.writer.put_record(self._sequence(result.item), record)

    def _opened(self, event: Opened) -> None:
        from osmosis_ai.traingate.report import OrderedRecordWriter

        self._planned = event.planned
        if self.keep_all:
            self.tally.keep_records = event.planned
        retry_failed = self.plan.journal is not None and self.plan.journal.retry_failed
        for kept in event.journaled() if event.journaled else ():
            if not runs_again(kept.outcome, retry_failed=retry_failed):
                self.tally.add_record(kept.data, replayed=True)
                if self.on_record is not None:  # every rollout of the run, resumed ones too
                    self.on_record(kept.data)
        if self.output:
            journaled, n, first = event.journaled, self.plan.n, self._first

            def premade(start: int, stop: int) -> Iterator[dict[str, Any]]:
                for kept in (
                    journaled(start=divmod(start + first, n), stop=divmod(stop + first, n))
                    if journaled
                    else ()
                ):
                    yield kept.data

            # Opened once the preflight passed (or nothing is left to run): a refused run writes no file.
            self.writer = OrderedRecordWriter(
                self.output, window=_record_window(event.in_flight), premade=premade, opener=self.opener
            )


def figures(tally: RunTally, source: str, *, samples_per_row: int, command: str) -> tuple[Run, Summary]:
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
