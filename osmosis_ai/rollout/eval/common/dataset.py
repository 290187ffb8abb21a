"""Legacy import path of the dataset reader; the reader is :mod:`osmosis_ai.evaluation.dataset`."""

from __future__ import annotations

from osmosis_ai.evaluation.dataset import Row as DatasetRow
from osmosis_ai.rollout.eval.dataset import REQUIRED_COLUMNS, DatasetReader, dataset_row_to_request

REQUIRED_COLUMNS_SET = frozenset(REQUIRED_COLUMNS)

__all__ = [
    "REQUIRED_COLUMNS",
    "REQUIRED_COLUMNS_SET",
    "DatasetReader",
    "DatasetRow",
    "dataset_row_to_request",
]
