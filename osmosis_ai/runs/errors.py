"""Errors of a run's inputs: the dataset reader's, and an agent's tool list.

Dataset errors are bad input, so they are ``ValueError`` too; a missing dataset file is also a
``FileNotFoundError``. Each dataset error carries where it happened (``path``, ``row``, ``line``,
``column``) and the offending ``value`` as attributes, and says the same in its message. The whole
tree is drawn in :mod:`osmosis_ai.errors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from osmosis_ai.errors import EvaluationError

_UNSET: Any = object()


class DatasetError(EvaluationError, ValueError):
    """A dataset file cannot be read, or one of its rows breaks the dataset format.

    ``row`` is the 0-based row index (blank JSONL lines and the CSV header do not count), ``line``
    the 1-based line of a JSONL file, ``column`` the column concerned and ``value`` its value, each
    ``None`` when the error is not about one row, line or column.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        row: int | None = None,
        line: int | None = None,
        column: str | None = None,
        value: Any = _UNSET,
    ) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)
        self.row = row
        self.line = line
        self.column = column
        self.has_value = value is not _UNSET
        self.value = None if value is _UNSET else value


class DatasetParseError(DatasetError):
    """The file is not a readable dataset: unknown format, bad JSON, bad CSV, unreadable Parquet."""


class DatasetNotFoundError(DatasetParseError, FileNotFoundError):
    """The dataset file does not exist (also a ``FileNotFoundError``)."""


class DatasetValidationError(DatasetError):
    """A row is readable but breaks the column rules (missing, null, non-string or blank value)."""


class ToolValidationError(EvaluationError, ValueError):
    """An agent's tool list breaks the function-tool schema; the row ends as the agent's error."""
