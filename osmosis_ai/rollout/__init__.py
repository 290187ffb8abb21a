"""Remote rollout: run an agent loop as a RolloutServer that TrainGate drives over HTTP.

Every public name resolves lazily (PEP 562), so ``import osmosis_ai.rollout`` loads neither pydantic
nor FastAPI, uvicorn or an HTTP client; each is imported when a name that needs it is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from osmosis_ai._lazy import lazy_exports

# 0.3's names, where they do not clash with 0.2's: ``RolloutContext``, ``RolloutStatus`` and
# ``MessageDict`` here keep their 0.2 meaning; 0.3's are in osmosis_ai.rollout.context and .types.
_EXPORTS_03: dict[str, str] = {
    "AgentWorkflow": "osmosis_ai.rollout.agent_workflow",
    "AgentWorkflowConfig": "osmosis_ai.rollout.types",
    "AgentWorkflowContext": "osmosis_ai.rollout.context",
    "AgentWorkflowOutput": "osmosis_ai.rollout.types",
    "BaseConfig": "osmosis_ai.rollout.types",
    "ConcurrencyConfig": "osmosis_ai.rollout.types",
    "ExecutionRequest": "osmosis_ai.rollout.types",
    "ExecutionResult": "osmosis_ai.rollout.types",
    "Grader": "osmosis_ai.rollout.grader",
    "GraderConfig": "osmosis_ai.rollout.types",
    "GraderContext": "osmosis_ai.rollout.context",
    "LocalBackend": "osmosis_ai.rollout.backend",
    "RolloutErrorCategory": "osmosis_ai.rollout.types",
    "RolloutInitRequest": "osmosis_ai.rollout.types",
    "RolloutInitResponse": "osmosis_ai.rollout.types",
    "RolloutResultResponse": "osmosis_ai.rollout.types",
    "RolloutSample": "osmosis_ai.rollout.types",
    "SampleSource": "osmosis_ai.rollout.context",
    "get_rollout_context": "osmosis_ai.rollout.context",
}

_EXPORTS: dict[str, str] = {
    **_EXPORTS_03,
    **dict.fromkeys(
        (
            "AgentLoopNotFoundError",
            "CompletionUsage",
            "CompletionsChoice",
            "CompletionsRequest",
            "CompletionsResponse",
            "DEFAULT_MAX_METADATA_SIZE_BYTES",
            "InitResponse",
            "LLMClientProtocol",
            "MessageDict",
            "OpenAIFunctionCallSchema",
            "OpenAIFunctionParametersSchema",
            "OpenAIFunctionParsedSchema",
            "OpenAIFunctionPropertySchema",
            "OpenAIFunctionSchema",
            "OpenAIFunctionToolCall",
            "OpenAIFunctionToolSchema",
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
            "RolloutStatus",
            "SamplingParamsDict",
            "ToolArgumentError",
            "ToolExecutionError",
            "ToolResponse",
            "get_max_metadata_size_bytes",
            "set_max_metadata_size_bytes",
        ),
        "osmosis_ai.rollout.core",
    ),
    **dict.fromkeys(
        (
            "CompletionsResult",
            "OsmosisLLMClient",
        ),
        "osmosis_ai.rollout.client",
    ),
    **dict.fromkeys(
        (
            "RolloutClientSettings",
            "RolloutServerSettings",
            "RolloutSettings",
            "configure",
            "get_settings",
            "reset_settings",
        ),
        "osmosis_ai.rollout.config",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_HOST",
            "DEFAULT_PORT",
            "ServeError",
            "create_app",
            "serve_agent_loop",
            "validate_and_report",
        ),
        "osmosis_ai.rollout.server",
    ),
    **dict.fromkeys(
        (
            "AgentLoopRegistry",
            "get_agent_loop",
            "list_agent_loops",
            "register_agent_loop",
            "unregister_agent_loop",
        ),
        "osmosis_ai.rollout.registry",
    ),
    **dict.fromkeys(
        (
            "AgentLoopValidationError",
            "ValidationError",
            "ValidationResult",
            "validate_agent_loop",
        ),
        "osmosis_ai.rollout.validator",
    ),
    **dict.fromkeys(
        (
            "PublicIPDetectionError",
            "detect_public_ip",
            "is_private_ip",
            "is_valid_hostname_or_ip",
            "validate_ipv4",
        ),
        "osmosis_ai.rollout.network",
    ),
    **dict.fromkeys(
        (
            "create_tool_error_result",
            "create_tool_result",
            "execute_tool_calls",
            "get_tool_call_info",
            "parse_tool_arguments",
            "serialize_tool_result",
        ),
        "osmosis_ai.rollout.tools",
    ),
    **dict.fromkeys(
        (
            "count_messages_by_role",
            "get_message_content",
            "get_message_role",
            "is_assistant_message",
            "is_tool_message",
            "is_user_message",
            "normalize_stop",
            "parse_tool_calls",
        ),
        "osmosis_ai.rollout.utils",
    ),
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from osmosis_ai.rollout.agent_workflow import AgentWorkflow
    from osmosis_ai.rollout.backend import LocalBackend
    from osmosis_ai.rollout.client import (
        CompletionsResult,
        OsmosisLLMClient,
    )
    from osmosis_ai.rollout.config import (
        RolloutClientSettings,
        RolloutServerSettings,
        RolloutSettings,
        configure,
        get_settings,
        reset_settings,
    )
    from osmosis_ai.rollout.context import (
        AgentWorkflowContext,
        GraderContext,
        SampleSource,
        get_rollout_context,
    )
    from osmosis_ai.rollout.core import (
        DEFAULT_MAX_METADATA_SIZE_BYTES,
        AgentLoopNotFoundError,
        CompletionsChoice,
        CompletionsRequest,
        CompletionsResponse,
        CompletionUsage,
        InitResponse,
        LLMClientProtocol,
        MessageDict,
        OpenAIFunctionCallSchema,
        OpenAIFunctionParametersSchema,
        OpenAIFunctionParsedSchema,
        OpenAIFunctionPropertySchema,
        OpenAIFunctionSchema,
        OpenAIFunctionToolCall,
        OpenAIFunctionToolSchema,
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
        RolloutStatus,
        SamplingParamsDict,
        ToolArgumentError,
        ToolExecutionError,
        ToolResponse,
        get_max_metadata_size_bytes,
        set_max_metadata_size_bytes,
    )
    from osmosis_ai.rollout.grader import Grader
    from osmosis_ai.rollout.network import (
        PublicIPDetectionError,
        detect_public_ip,
        is_private_ip,
        is_valid_hostname_or_ip,
        validate_ipv4,
    )
    from osmosis_ai.rollout.registry import (
        AgentLoopRegistry,
        get_agent_loop,
        list_agent_loops,
        register_agent_loop,
        unregister_agent_loop,
    )
    from osmosis_ai.rollout.server import (
        DEFAULT_HOST,
        DEFAULT_PORT,
        ServeError,
        create_app,
        serve_agent_loop,
        validate_and_report,
    )
    from osmosis_ai.rollout.tools import (
        create_tool_error_result,
        create_tool_result,
        execute_tool_calls,
        get_tool_call_info,
        parse_tool_arguments,
        serialize_tool_result,
    )
    from osmosis_ai.rollout.types import (
        AgentWorkflowConfig,
        AgentWorkflowOutput,
        BaseConfig,
        ConcurrencyConfig,
        ExecutionRequest,
        ExecutionResult,
        GraderConfig,
        RolloutErrorCategory,
        RolloutInitRequest,
        RolloutInitResponse,
        RolloutResultResponse,
        RolloutSample,
    )
    from osmosis_ai.rollout.utils import (
        count_messages_by_role,
        get_message_content,
        get_message_role,
        is_assistant_message,
        is_tool_message,
        is_user_message,
        normalize_stop,
        parse_tool_calls,
    )
    from osmosis_ai.rollout.validator import (
        AgentLoopValidationError,
        ValidationError,
        ValidationResult,
        validate_agent_loop,
    )
