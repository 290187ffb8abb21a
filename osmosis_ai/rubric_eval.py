"""Rubric evaluation at its compatibility import path; the implementation lives in ``osmosis_ai.judge``.

Importing this module does not import LiteLLM; the first judgment does.
"""

from __future__ import annotations

from osmosis_ai.judge.batch import aevaluate_rubric_batch as aevaluate_rubric_batch
from osmosis_ai.judge.batch import evaluate_rubric_batch as evaluate_rubric_batch
from osmosis_ai.judge.errors import MissingAPIKeyError
from osmosis_ai.judge.errors import ModelNotFoundError as ModelNotFoundError
from osmosis_ai.judge.errors import ProviderRequestError as ProviderRequestError
from osmosis_ai.judge.evaluate import aevaluate_rubric as aevaluate_rubric
from osmosis_ai.judge.evaluate import evaluate_rubric
from osmosis_ai.judge.keys import DEFAULT_API_KEY_ENV as DEFAULT_API_KEY_ENV
from osmosis_ai.judge.keys import ensure_api_key_available
from osmosis_ai.judge.routing import DEFAULT_REQUEST_TIMEOUT_SECONDS
from osmosis_ai.judge.types import ModelInfo, RewardRubricRunResult

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_SECONDS",
    "MissingAPIKeyError",
    "ModelInfo",
    "RewardRubricRunResult",
    "ensure_api_key_available",
    "evaluate_rubric",
]
