"""0.3's rubric API at its 0.3 path: ``await evaluate_rubric(solution_str=, rubric=, model=...)``
returning a ``RubricResult``; judged by this package's judge (:mod:`osmosis_ai.judge`).

The top-level ``osmosis_ai.evaluate_rubric`` keeps its 0.2 meaning (synchronous, ``model_info``).
Names load on first use, so importing this package does not import LiteLLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from osmosis_ai._lazy import lazy_exports

_EXPORTS = {
    "evaluate_rubric": "osmosis_ai.eval.rubric.engine",
    "RubricResult": "osmosis_ai.eval.rubric.types",
    "MissingAPIKeyError": "osmosis_ai.eval.rubric.types",
    "ModelNotFoundError": "osmosis_ai.eval.rubric.types",
    "ProviderRequestError": "osmosis_ai.eval.rubric.types",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from osmosis_ai.eval.rubric.engine import evaluate_rubric
    from osmosis_ai.eval.rubric.types import (
        MissingAPIKeyError,
        ModelNotFoundError,
        ProviderRequestError,
        RubricResult,
    )
