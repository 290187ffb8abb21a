"""osmosis-ai 0.2 import paths and error classes keep working."""

from __future__ import annotations

import pickle

import pytest

import osmosis_ai
from osmosis_ai import rubric_eval, rubric_types
from osmosis_ai.errors import OsmosisError


def test_rubric_eval_public_surface() -> None:
    assert rubric_eval.__all__ == [
        "DEFAULT_REQUEST_TIMEOUT_SECONDS",
        "MissingAPIKeyError",
        "ModelInfo",
        "RewardRubricRunResult",
        "ensure_api_key_available",
        "evaluate_rubric",
    ]
    assert rubric_eval.DEFAULT_REQUEST_TIMEOUT_SECONDS == 30.0
    assert rubric_eval.DEFAULT_API_KEY_ENV["google"] == "GEMINI_API_KEY"
    assert rubric_eval.MissingAPIKeyError is rubric_types.MissingAPIKeyError is osmosis_ai.MissingAPIKeyError
    assert osmosis_ai.evaluate_rubric_batch is rubric_eval.evaluate_rubric_batch
    assert set(rubric_types.ModelInfo.__annotations__) >= {
        "provider",
        "model",
        "api_key_env",
        "reasoning_effort",
    }


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (rubric_types.MissingAPIKeyError, RuntimeError),
        (rubric_types.ProviderRequestError, RuntimeError),
        (rubric_types.ModelNotFoundError, rubric_types.ProviderRequestError),
    ],
)
def test_errors_keep_their_0_2_bases(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, builtin) and issubclass(error, OsmosisError)


def test_provider_request_error_message_and_pickling() -> None:
    error = rubric_types.ProviderRequestError("openai", "gpt-x", "  quota exceeded ")
    assert str(error) == "Provider 'openai' request for model 'gpt-x' failed. quota exceeded"
    assert error.detail == "quota exceeded"
    assert "no additional detail" in rubric_types.ModelNotFoundError("p", "m", " ").detail
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.provider, copy.model, str(copy)) == (type(error), "openai", "gpt-x", str(error))
