"""A dataset of answers to score (``osmosis reward score``): each row holds an answer
(``solution_str``), its ``ground_truth`` and optionally an ``extra_info`` mapping.

:class:`Columns` names those three columns (each may have another name) and turns a row into what
the engine runs. :meth:`Columns.attempt` is the stored executor's ``attempt_of``: a completed attempt
whose final message is the answer and which carries the
:class:`~osmosis_ai.rewards.runtime.Sample` to score (:meth:`Columns.sample` is the scorer's
``sample_of``), or, for a row that cannot be scored as given, a ``reward_error`` that names the row,
the column and what is wrong, so the other rows still score. Column names are matched exactly.
Every CSV cell is text, so in a CSV file ``extra_info`` may hold a JSON object.

:func:`output_line` is a row's line of the output: ``row_index``, ``score``, ``outcome`` and
``error``, then the row's own fields. A column with one of those four names is replaced, so that
scoring an earlier output again gives the new figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.runtime.sample import Sample
from osmosis_ai.rewards.score import describe_value
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt

if TYPE_CHECKING:
    from osmosis_ai.runs.journal import SampleRecord

OWN_FIELDS = ("row_index", "score", "outcome", "error")
"""The fields every output line starts with."""
SHOWN_COLUMNS = 20


class RowRefused(ValueError):
    """A row that cannot be scored as given; the message names the row, the column and the problem."""


@dataclass(frozen=True)
class Columns:
    """Where a row keeps its answer, its ground truth and its extra information."""

    solution: str = "solution_str"
    ground_truth: str = "ground_truth"
    extra_info: str = "extra_info"
    text_cells: bool = False
    """Every cell is text (CSV): an ``extra_info`` cell is read as a JSON object."""

    def sample_of_row(self, index: int, row: Any) -> Sample:
        """The row's :class:`Sample`, or :class:`RowRefused` saying why there is none."""
        if not isinstance(row, Mapping):
            raise RowRefused(f"row {index} is {describe_value(row)}, not an object with columns")
        for column in (self.solution, self.ground_truth):
            if column not in row:
                raise RowRefused(f"row {index} has no column {column!r} (its columns: {_names(row)})")
        solution = row[self.solution]
        if not isinstance(solution, str):
            found = "null" if solution is None else describe_value(solution)
            raise RowRefused(f"row {index}, column {self.solution!r} is {found}; an answer is a string")
        return Sample(row[self.ground_truth], solution_str=solution, extra_info=self._extra(index, row))

    def _extra(self, index: int, row: Mapping[str, Any]) -> Mapping[str, Any] | None:
        value = row.get(self.extra_info)
        if self.text_cells and isinstance(value, str):
            if not value.strip():
                return None
            try:
                value = json.loads(value)
            except ValueError:
                raise RowRefused(
                    f"row {index}, column {self.extra_info!r} is not a JSON object: {value[:80]!r}"
                ) from None
        if value is None or isinstance(value, Mapping):
            return value
        raise RowRefused(
            f"row {index}, column {self.extra_info!r} is {describe_value(value)}; extra_info is an object"
        )

    def attempt(self, item: WorkItem) -> Attempt:
        """The stored executor's ``attempt_of`` (see the module docstring)."""
        try:
            sample = self.sample_of_row(item.row_index, item.row)
        except RowRefused as exc:
            return Attempt(Outcome.REWARD_ERROR, error=str(exc))
        return Attempt(
            Outcome.COMPLETED,
            final_messages=[{"role": "assistant", "content": sample.solution_str}],
            source=sample,
        )

    @staticmethod
    def sample(item: WorkItem, attempt: Attempt) -> Sample:
        """The scorer's ``sample_of``: the sample :meth:`attempt` made."""
        sample: Sample = attempt.source
        return sample


def output_line(index: int, row: Any, record: Mapping[str, Any]) -> dict[str, Any]:
    """Row ``index``'s output line from its journalled ``record`` (:meth:`~osmosis_ai.runs.result.Result.record`)."""
    line: dict[str, Any] = {
        "row_index": index,
        "score": record.get("reward"),
        "outcome": record.get("outcome"),
        "error": record.get("error"),
    }
    if isinstance(row, Mapping):
        line.update((key, value) for key, value in row.items() if key not in OWN_FIELDS)
    return line


def output_lines(dataset: str, records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """The output line of every row of ``dataset`` that has one of ``records``, in row order."""
    from osmosis_ai.runs.dataset import iter_raw

    by_key = {record.key: record for record in records}
    return [output_line(raw.index, raw.value, by_key[(raw.index, 0)].data)
            for raw in iter_raw(dataset) if (raw.index, 0) in by_key]  # fmt: skip


def _names(row: Mapping[str, Any]) -> str:
    names = [repr(str(key)) for key in list(row)[:SHOWN_COLUMNS]]
    more = len(row) - SHOWN_COLUMNS
    return (", ".join(names) or "none") + (f" and {more} more" if more > 0 else "")
