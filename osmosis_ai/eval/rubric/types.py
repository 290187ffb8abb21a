"""0.3's rubric result, and the judge's errors under the names 0.3 gives them."""

from __future__ import annotations

from dataclasses import dataclass

from osmosis_ai.judge.errors import MissingAPIKeyError, ModelNotFoundError, ProviderRequestError

__all__ = ["MissingAPIKeyError", "ModelNotFoundError", "ProviderRequestError", "RubricResult"]


@dataclass
class RubricResult:
    """One judgment: the score within the requested range, and the judge's explanation."""

    score: float
    explanation: str
