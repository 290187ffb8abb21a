"""Legacy import path of the shared parts of local test/eval, over :mod:`osmosis_ai.evaluation`."""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "REQUIRED_COLUMNS": "osmosis_ai.rollout.eval.common.dataset",
    "REQUIRED_COLUMNS_SET": "osmosis_ai.rollout.eval.common.dataset",
    "TOOL_NAME_PATTERN": "osmosis_ai.rollout.eval.common.runner",
    "DatasetReader": "osmosis_ai.rollout.eval.common.dataset",
    "DatasetRow": "osmosis_ai.rollout.eval.common.dataset",
    "dataset_row_to_request": "osmosis_ai.rollout.eval.common.dataset",
    "DatasetParseError": "osmosis_ai.rollout.eval.common.errors",
    "DatasetValidationError": "osmosis_ai.rollout.eval.common.errors",
    "LocalExecutionError": "osmosis_ai.rollout.eval.common.errors",
    "ProviderError": "osmosis_ai.rollout.eval.common.errors",
    "SystemicProviderError": "osmosis_ai.rollout.eval.common.errors",
    "ToolValidationError": "osmosis_ai.rollout.eval.common.errors",
    "ExternalLLMClient": "osmosis_ai.rollout.eval.common.llm_client",
    "validate_tools": "osmosis_ai.rollout.eval.common.runner",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
