"""What ``osmosis rollout run``, ``osmosis test`` and ``osmosis eval`` share.

The one dataset reader (:class:`DatasetReader`, :func:`iter_raw`), the one outcome model
(:class:`Outcome`, :class:`OutcomeCounts`, :func:`verdict` — the exit-status rule), the
classification of model-provider failures (:func:`classify_provider_error`, :func:`preflight`), and
the in-process model client of local runs (:class:`ExternalLLMClient`,
:func:`dataset_row_to_request`; the runs themselves are the run engine's, :mod:`osmosis_ai.runs`), and the statistics an evaluation reports
with their intervals (:func:`pass_at_k`, :func:`wilson_interval`, :func:`bootstrap_interval`,
:func:`paired_difference`), eval functions (:class:`EvalFnWrapper`) and the crash-safe journal of
finished samples (:class:`Journal`).
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
    "ProviderError": "osmosis_ai.evaluation.errors",
    "SystemicProviderError": "osmosis_ai.evaluation.errors",
    "ExternalLLMClient": "osmosis_ai.evaluation.llm_client",
    "dataset_row_to_request": "osmosis_ai.evaluation.requests",
    "classify_provider_error": "osmosis_ai.evaluation.providers",
    "preflight": "osmosis_ai.evaluation.providers",
    "EvalFnWrapper": "osmosis_ai.evaluation.eval_fn",
    "Journal": "osmosis_ai.evaluation.journal",
    "SampleRecord": "osmosis_ai.evaluation.journal",
    "JournalError": "osmosis_ai.evaluation.journal",
    "JournalMismatchError": "osmosis_ai.evaluation.journal",
    "EvalFnError": "osmosis_ai.evaluation.errors",
    "Estimate": "osmosis_ai.evaluation.statistics",
    "pass_at_k": "osmosis_ai.evaluation.statistics",
    "wilson_interval": "osmosis_ai.evaluation.statistics",
    "bootstrap_interval": "osmosis_ai.evaluation.statistics",
    "paired_difference": "osmosis_ai.evaluation.statistics",
    "Outcome": "osmosis_ai.evaluation.outcome",
    "OutcomeCounts": "osmosis_ai.evaluation.outcome",
    "verdict": "osmosis_ai.evaluation.outcome",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
