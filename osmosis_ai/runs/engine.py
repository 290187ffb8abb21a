"""The run loop: items in, typed and scored results out, each journalled before it counts.

:func:`run_items` takes work items lazily (a bounded distance ahead of the ones running), runs each
through a :class:`Pipeline` — the executor, then the scorer, under the item's time limit — with
at most ``concurrency`` in flight (a number, or a :class:`~osmosis_ai._pool.Limit` that may change),
commits every result to the journal, and only then hands it to ``on_result``. The commit and
``on_result`` run after the item's slot is free (``run_bounded``'s ``then``): a slot stands for a
model call or a scoring in flight, not for a disk sync, and the next item starts while the journal
syncs; they still count against the items taken, so a slow disk or consumer slows the run within a
bounded distance instead of piling results up.

An attempt marked ``systemic`` (no later item can succeed: a refused key, an unknown model) stops
the run: no new item starts, the ones in flight finish, and that result is not journalled, so the
run after the fix runs it. Any exception — the journal's disk, the application's callback, the item
iterable — cancels the items in flight and is raised; their results were never counted.

There is one of it: ``tests/test_one_of_each.py::test_one_run_loop_and_one_plan``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from osmosis_ai._deadline import Deadline
from osmosis_ai._pool import Limit, run_bounded
from osmosis_ai.observe import tracing
from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt, Result
from osmosis_ai.runs.scorer import Scorer

if TYPE_CHECKING:
    from osmosis_ai.runs.journal import Journal


class Executor(Protocol):
    """Runs one work item into an :class:`~osmosis_ai.runs.result.Attempt`, by ``deadline`` if given.
    It never raises for a failure of the item itself: that is the attempt's outcome."""

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt: ...


ProcessItem = Callable[[WorkItem], Awaitable[Result]]
OnResult = Callable[[Result], Awaitable[None] | None]


class Pipeline:
    """What runs one item: ``executor``, then ``scorer``, both within ``timeout`` seconds when set.

    With tracing on (:mod:`osmosis_ai.observe.tracing`) each item is one rollout span, its scoring
    a child span.
    """

    def __init__(self, executor: Executor, scorer: Scorer, *, timeout: float | None = None) -> None:
        self.executor = executor
        self.scorer = scorer
        self.timeout = timeout

    async def __call__(self, item: WorkItem) -> Result:
        deadline = Deadline.after(self.timeout) if self.timeout else None
        attributes = {
            "osmosis.row_index": item.row_index,
            "osmosis.sample_index": item.sample_index,
            "osmosis.model_tag": item.model_tag,
        }
        with tracing.rollout(self._agent, attributes) as span:
            attempt = await self.executor.run(item, deadline=deadline)
            if span is None or attempt.outcome is not Outcome.COMPLETED:
                result = await self.scorer.score(item, attempt, deadline=deadline)
            else:
                with tracing.child("score", {"osmosis.score_functions": self.scorer.names}) as scoring:
                    result = await self.scorer.score(item, attempt, deadline=deadline)
                    tracing.ended(scoring, result.outcome.value, _errors(result), reward=result.reward)
            tracing.ended(span, result.outcome.value, _failure(result), reward=result.reward)
        return result

    @property
    def _agent(self) -> str:
        agent = getattr(self.executor, "agent_loop", None)
        name = getattr(agent, "name", None)
        return name if isinstance(name, str) and name else type(agent or self.executor).__name__


def _errors(result: Result) -> str | None:
    return "; ".join(f"{name}: {error}" for name, error in result.score_errors.items()) or None


def _failure(result: Result) -> str | None:
    if result.outcome is Outcome.COMPLETED:
        return None
    return result.attempt.error or _errors(result) or result.outcome.value


@dataclass
class RunReport:
    """How the loop ended: items started, and the result that stopped the run early, if one did."""

    started: int = 0
    stopped_by: Result | None = None

    @property
    def stop_reason(self) -> str | None:
        return None if self.stopped_by is None else self.stopped_by.attempt.systemic


async def run_items(
    items: Iterable[WorkItem],
    process: ProcessItem,
    *,
    concurrency: int | Limit,
    journal: Journal | None = None,
    keep_messages: bool = False,
    on_result: OnResult | None = None,
    before_start: Callable[[WorkItem], Awaitable[None]] | None = None,
) -> RunReport:
    """Run ``items`` through ``process`` (see the module docstring) and report how the loop ended.

    ``keep_messages`` journals each result's final conversation beside it (the journal's samples
    file). ``before_start(item)`` is awaited once the item is taken and before it starts, e.g. to
    hold back items an in-order consumer cannot buffer yet.
    """
    from osmosis_ai.runs.journal import SampleRecord

    report = RunReport()

    async def one(item: WorkItem) -> Result:
        result = await process(item)
        if result.attempt.systemic is not None and report.stopped_by is None:
            report.stopped_by = result  # seen before the slot is free: nothing new starts
        return result

    async def finish(item: WorkItem, result: Result) -> None:
        if journal is not None and result.attempt.systemic is None:
            messages = result.attempt.final_messages if keep_messages else None
            record = SampleRecord(
                item.row_index, item.sample_index, result.outcome, result.record(), item.model_tag, messages
            )
            await journal.arecord(record)  # committed before it counts: a crash loses nothing counted
        if on_result is not None:
            done = on_result(result)
            if done is not None:
                await done

    report.started = await run_bounded(
        items,
        one,
        concurrency=concurrency,
        before_start=before_start,
        stop=lambda: report.stopped_by is not None,
        then=finish,
    )
    return report
