"""Answers that already exist: an executor that runs no agent and calls no model.

``osmosis reward score`` (a dataset of answers) and ``osmosis regrade`` (the records of an earlier
run) only score. Each item's :class:`~osmosis_ai.runs.result.Attempt` is built from its row by the
command's ``attempt_of`` — the stored final messages and whatever the record kept — so the rest of
the engine (the scorer, the journal, the outcomes and the summaries) is the same as for a run.

An answer that is not in the item's row (a regrade's, read from an earlier run's records) travels
in the item itself: a :class:`StoredItem` carries the attempt its record becomes, as plain data, so
the item runs the same wherever it is sent (a Ray worker on another node has none of the files
the records came from), and :func:`carried` is its ``attempt_of``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from osmosis_ai._deadline import Deadline
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt

AttemptOf = Callable[[WorkItem], Attempt]


@dataclass(frozen=True)
class StoredItem(WorkItem):
    """A work item with its stored answer: ``answer`` is the attempt it becomes (built when the
    item is taken, so only the items in flight hold one)."""

    answer: Attempt = field(kw_only=True)


def carried(item: WorkItem) -> Attempt:
    """The ``attempt_of`` of :class:`StoredItem` items: the answer each carries."""
    if not isinstance(item, StoredItem):
        raise TypeError(f"carried() takes a StoredItem, got {type(item).__name__}")
    return item.answer


class StoredExecutor:
    """Turns each item's row into its attempt with ``attempt_of``; nothing runs, so no deadline applies."""

    def __init__(self, attempt_of: AttemptOf) -> None:
        self.attempt_of = attempt_of

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        return self.attempt_of(item)
