"""Errors raised while judging with a rubric.

Each derives from :class:`osmosis_ai.errors.OsmosisError` and from the builtin that existing callers
catch for the same situation (see docs/compatibility.md); ``osmosis_ai.rubric_types`` and
``osmosis_ai.rubric_eval`` re-export the provider and key errors. Their place in the whole tree is
drawn in :mod:`osmosis_ai.errors`.
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


class JudgeTimeoutError(ProviderRequestError, TimeoutError):
    """No verdict arrived within the judgment's timeout (also a ``TimeoutError``)."""


class JudgeInputError(OsmosisError, TypeError):
    """An argument of ``evaluate_rubric`` is missing or of the wrong type (also a ``TypeError``)."""


class ScoreRangeError(OsmosisError, ValueError):
    """The score range is empty, inverted or not finite (also a ``ValueError``)."""


class JudgeSettingError(OsmosisError, ValueError):
    """A judging setting (concurrency, rate limit, cache size, ...) is out of its valid range."""


class VerdictError(OsmosisError, ValueError):
    """The judge's reply holds no usable ``{"score": ..., "explanation": ...}`` object.

    Raised while reading a reply. The judging loop answers it with a corrective request, and reports
    a :class:`ProviderRequestError` once those run out, so ``evaluate_rubric`` callers never see it.
    """
