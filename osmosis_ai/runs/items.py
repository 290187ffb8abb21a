"""Work items: what one run of the engine is made of.

A run is every dataset row × ``n`` samples, once per model under comparison (``primary``, and
``baseline`` when a second model runs over the same rows). :func:`work_items` yields them lazily
in key order — row, then sample, then model — from ``(row index, row)`` pairs read lazily by the
one dataset reader, so a dataset is never held whole; ``skip`` leaves out the items a resumed run
already has (asked once per item, in that order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osmosis_ai.runs.journal import PRIMARY


@dataclass(frozen=True)
class WorkItem:
    """One sample of one row for one model: the unit the engine runs, scores, journals and counts."""

    row_index: int
    sample_index: int
    row: Mapping[str, Any]
    model_tag: str = PRIMARY

    @property
    def key(self) -> tuple[int, int]:
        """The journal key within the item's model tag."""
        return (self.row_index, self.sample_index)


Skip = Callable[[WorkItem], bool]


def work_items(
    rows: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    n: int = 1,
    tags: Sequence[str] = (PRIMARY,),
    skip: Skip | None = None,
) -> Iterator[WorkItem]:
    """The items of ``rows`` × ``n`` samples × ``tags``, lazily, in key order, without the skipped ones."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    for row_index, row in rows:
        for sample in range(n):
            for tag in tags:
                item = WorkItem(row_index, sample, row, tag)
                if skip is None or not skip(item):
                    yield item
