"""Datasets for ``osmosis rollout run``: the prompt format read by :mod:`osmosis_ai.evaluation.dataset`.

:func:`load_dataset` keeps the whole (validated) dataset because the run opens one session per row
up front; the reading and the column rules are the shared reader's.
"""

from __future__ import annotations

from pathlib import Path

from osmosis_ai.evaluation.dataset import REQUIRED_COLUMNS, SUFFIXES, DatasetReader, Row, normalize_row
from osmosis_ai.evaluation.errors import DatasetError

__all__ = ["REQUIRED_COLUMNS", "SUFFIXES", "Row", "load_dataset", "normalize_row"]


def load_dataset(path: str | Path) -> list[Row]:
    """Read and validate a whole dataset file; raise :class:`DatasetError` on the first problem."""
    reader = DatasetReader(path)
    rows = reader.read()
    if not rows:
        raise DatasetError(f"{reader.file_path}: the dataset has no rows", path=reader.file_path)
    return rows
