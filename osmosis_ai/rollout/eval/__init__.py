"""The local test/eval API at its compatibility import path, over :mod:`osmosis_ai.evaluation`.

The dataset reader, the row-to-request helper, ``ExternalLLMClient`` and their errors; the 0.2
sub-packages ``common``, ``test_mode`` and ``evaluation`` re-export the parts of this design that
keep 0.2's meaning (docs/compatibility.md lists the ones replaced).
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "DatasetReader": "osmosis_ai.rollout.eval.dataset",
    "REQUIRED_COLUMNS": "osmosis_ai.rollout.eval.dataset",
    "dataset_row_to_request": "osmosis_ai.rollout.eval.dataset",
    "DatasetParseError": "osmosis_ai.rollout.eval.dataset",
    "DatasetValidationError": "osmosis_ai.rollout.eval.dataset",
    "LocalExecutionError": "osmosis_ai.rollout.eval.dataset",
    "ExternalLLMClient": "osmosis_ai.rollout.eval.llm_client",
    "ProviderError": "osmosis_ai.rollout.eval.llm_client",
    "SystemicProviderError": "osmosis_ai.rollout.eval.llm_client",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
