"""What ``osmosis rollout run``, ``osmosis test`` and ``osmosis eval`` share.

The one dataset reader (:class:`DatasetReader`, :func:`iter_raw`), the one outcome model
(:class:`Outcome`, :class:`OutcomeCounts`, :func:`verdict` — the exit-status rule), and the
classification of model-provider failures (:func:`classify_provider_error`, :func:`preflight`).
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "DatasetReader": "osmosis_ai.evaluation.dataset",
    "RawRow": "osmosis_ai.evaluation.dataset",
    "REQUIRED_COLUMNS": "osmosis_ai.evaluation.dataset",
    "count_rows": "osmosis_ai.evaluation.dataset",
    "iter_raw": "osmosis_ai.evaluation.dataset",
    "normalize_row": "osmosis_ai.evaluation.dataset",
    "EvaluationError": "osmosis_ai.evaluation.errors",
    "DatasetError": "osmosis_ai.evaluation.errors",
    "DatasetParseError": "osmosis_ai.evaluation.errors",
    "DatasetNotFoundError": "osmosis_ai.evaluation.errors",
    "DatasetValidationError": "osmosis_ai.evaluation.errors",
    "ProviderCheckError": "osmosis_ai.evaluation.errors",
    "Outcome": "osmosis_ai.evaluation.outcome",
    "OutcomeCounts": "osmosis_ai.evaluation.outcome",
    "verdict": "osmosis_ai.evaluation.outcome",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
