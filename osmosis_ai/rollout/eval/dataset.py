"""Legacy import path of the dataset reader; the reader is :mod:`osmosis_ai.evaluation.dataset`."""

from __future__ import annotations

from osmosis_ai.evaluation.dataset import DatasetReader
from osmosis_ai.evaluation.errors import DatasetParseError, DatasetValidationError
from osmosis_ai.evaluation.errors import EvaluationError as LocalExecutionError
from osmosis_ai.evaluation.requests import dataset_row_to_request

# 0.2's order; the reader matches the columns in any order and case.
REQUIRED_COLUMNS = ["ground_truth", "user_prompt", "system_prompt"]

__all__ = [
    "REQUIRED_COLUMNS",
    "DatasetParseError",
    "DatasetReader",
    "DatasetValidationError",
    "LocalExecutionError",
    "dataset_row_to_request",
]
