"""The 0.3 rollout types at their 0.3 import path: samples, statuses and error categories, the
workflow and grader configurations, and the wire's bodies."""

from __future__ import annotations

from osmosis_ai.rollout.types.config import AgentWorkflowConfig, BaseConfig, ConcurrencyConfig, GraderConfig
from osmosis_ai.rollout.types.output import AgentWorkflowOutput, Messages
from osmosis_ai.rollout.types.protocol import (
    POLLING_LEASE_HEADER,
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutLifecycle,
    RolloutResultResponse,
)
from osmosis_ai.rollout.types.sample import ExecutionRequest, ExecutionResult, MessageDict, RolloutSample
from osmosis_ai.rollout.types.status import RolloutErrorCategory, RolloutStatus

__all__ = [
    "POLLING_LEASE_HEADER",
    "AgentWorkflowConfig",
    "AgentWorkflowOutput",
    "BaseConfig",
    "CancelRolloutsRequest",
    "CancelRolloutsResponse",
    "ConcurrencyConfig",
    "ExecutionRequest",
    "ExecutionResult",
    "GraderConfig",
    "MessageDict",
    "Messages",
    "RolloutErrorCategory",
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutLifecycle",
    "RolloutResultResponse",
    "RolloutSample",
    "RolloutStatus",
]
