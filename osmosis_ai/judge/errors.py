"""Errors raised while judging with a rubric.

They derive from :class:`osmosis_ai.errors.OsmosisError` and from the builtin osmosis-ai 0.2
raised in the same situation; ``osmosis_ai.rubric_types`` and ``osmosis_ai.rubric_eval``
re-export the provider and key errors.

* JudgeInputError (TypeError)            an argument is missing or has the wrong type
* ScoreRangeError (ValueError)           a bound is not a finite number, or score_max is not above score_min
* JudgeSettingError (ValueError)         concurrency, rate limit or cache size out of range
* MissingAPIKeyError (RuntimeError)      a provider that needs an API key has none configured
* ProviderRequestError (RuntimeError)    the call failed, or the reply held no usable verdict
  - ModelNotFoundError                   the provider does not know the model id
"""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError

_NO_DETAIL = "The provider returned no additional detail."


class MissingAPIKeyError(OsmosisError, RuntimeError):
    """No API key is configured for a provider that needs one; the message says how to set it."""


class ProviderRequestError(OsmosisError, RuntimeError):
    """A judge request failed; ``provider``, ``model`` and ``detail`` say which and why."""

    def __init__(self, provider: str, model: str, detail: str) -> None:
        self.provider = provider
        self.model = model
        self.detail = (detail or "").strip() or _NO_DETAIL
        super().__init__(f"Provider '{provider}' request for model '{model}' failed. {self.detail}")

    def __reduce__(self) -> tuple[type[ProviderRequestError], tuple[str, str, str]]:
        return (type(self), (self.provider, self.model, self.detail))


class ModelNotFoundError(ProviderRequestError):
    """The provider does not recognise the requested model id."""


class JudgeInputError(OsmosisError, TypeError):
    """An argument of ``evaluate_rubric`` is missing or of the wrong type (a ``TypeError`` in 0.2)."""


class ScoreRangeError(OsmosisError, ValueError):
    """The score range is empty, inverted or not finite (a ``ValueError`` in 0.2)."""


class JudgeSettingError(OsmosisError, ValueError):
    """A judging setting (concurrency, rate limit, cache size, ...) is out of its valid range."""
