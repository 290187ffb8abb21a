"""Osmosis SDK: reward validation, rubric evaluation through LiteLLM, and remote rollout serving.

Importing the package is free: every public name is resolved on first use (PEP 562), so
``from osmosis_ai import osmosis_reward`` never loads LiteLLM, FastAPI or pydantic.
"""

from __future__ import annotations

from osmosis_ai._aliases import install_alias_finder
from osmosis_ai._lazy import lazy_exports
from osmosis_ai.consts import PACKAGE_VERSION as __version__

install_alias_finder()  # serves osmosis-ai 0.2's import paths (osmosis_ai.rubric_eval, ...)

_ROLLOUT_NAMES = (
    "CompletionsResult",
    "InitResponse",
    "OpenAIFunctionToolSchema",
    "OsmosisLLMClient",
    "OsmosisRolloutError",
    "OsmosisServerError",
    "OsmosisTimeoutError",
    "OsmosisTransportError",
    "OsmosisValidationError",
    "RolloutAgentLoop",
    "RolloutContext",
    "RolloutMetrics",
    "RolloutRequest",
    "RolloutResponse",
    "RolloutResult",
    "create_app",
    "get_agent_loop",
    "list_agent_loops",
    "register_agent_loop",
)

_EXPORTS: dict[str, str] = {
    "osmosis_reward": "osmosis_ai.rewards",
    "osmosis_rubric": "osmosis_ai.rewards",
    "evaluate_rubric": "osmosis_ai.judge.evaluate",
    "aevaluate_rubric": "osmosis_ai.judge.evaluate",
    "evaluate_rubric_batch": "osmosis_ai.judge.batch",
    "MissingAPIKeyError": "osmosis_ai.judge.errors",
    "ProviderRequestError": "osmosis_ai.judge.errors",
    "ModelNotFoundError": "osmosis_ai.judge.errors",
    **dict.fromkeys(_ROLLOUT_NAMES, "osmosis_ai.rollout"),
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

TYPE_CHECKING = (
    False  # keeps typing off the start-up path (see benchmarks/startup.py); checkers read it as True
)

if TYPE_CHECKING:
    from osmosis_ai.judge.batch import evaluate_rubric_batch
    from osmosis_ai.judge.errors import MissingAPIKeyError, ModelNotFoundError, ProviderRequestError
    from osmosis_ai.judge.evaluate import aevaluate_rubric, evaluate_rubric
    from osmosis_ai.rewards import osmosis_reward, osmosis_rubric
    from osmosis_ai.rollout import (
        CompletionsResult,
        InitResponse,
        OpenAIFunctionToolSchema,
        OsmosisLLMClient,
        OsmosisRolloutError,
        OsmosisServerError,
        OsmosisTimeoutError,
        OsmosisTransportError,
        OsmosisValidationError,
        RolloutAgentLoop,
        RolloutContext,
        RolloutMetrics,
        RolloutRequest,
        RolloutResponse,
        RolloutResult,
        create_app,
        get_agent_loop,
        list_agent_loops,
        register_agent_loop,
    )
del TYPE_CHECKING
