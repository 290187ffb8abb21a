"""Rubric judging types and errors at their compatibility import path (defined in ``osmosis_ai.judge``)."""

from __future__ import annotations

from osmosis_ai.judge.errors import MissingAPIKeyError, ModelNotFoundError, ProviderRequestError
from osmosis_ai.judge.types import ModelInfo, RewardRubricRunResult

__all__ = [
    "MissingAPIKeyError",
    "ModelInfo",
    "ModelNotFoundError",
    "ProviderRequestError",
    "RewardRubricRunResult",
]
