"""Legacy import path of the local test/eval errors; they are :mod:`osmosis_ai.evaluation.errors`."""

from __future__ import annotations

from osmosis_ai.evaluation.errors import (
    DatasetParseError,
    DatasetValidationError,
    ProviderError,
    SystemicProviderError,
    ToolValidationError,
)
from osmosis_ai.evaluation.errors import EvaluationError as LocalExecutionError

__all__ = [
    "DatasetParseError",
    "DatasetValidationError",
    "LocalExecutionError",
    "ProviderError",
    "SystemicProviderError",
    "ToolValidationError",
]
