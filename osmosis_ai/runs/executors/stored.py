"""Answers that already exist: an executor that runs no agent and calls no model.

``osmosis reward score`` (a dataset of answers) and ``osmosis regrade`` (the records of an earlier
run) only score. Each item's :class:`~osmosis_ai.runs.result.Attempt` is built from its row by the
command's ``attempt_of`` — the stored final messages and whatever the record kept — so the rest of
the engine (the scorer, the journal, the outcomes and the summaries) is the same as for a run.
"""

from __future__ import annotations

from collections.abc import Callable

from osmosis_ai.runs.items import Deadline, WorkItem
from osmosis_ai.runs.result import Attempt

AttemptOf = Callable[[WorkItem], Attempt]


class StoredExecutor:
    """Turns each item's row into its attempt with ``attempt_of``; nothing runs, so no deadline applies."""

    def __init__(self, attempt_of: AttemptOf) -> None:
        self.attempt_of = attempt_of

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        return self.attempt_of(item)
