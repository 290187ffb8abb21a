"""The 0.3 wire's bodies: submit (``POST /rollout``), poll (``GET /rollout/{id}/result``, under a
lease carried in the ``X-Osmosis-Rollout-Lease`` header), cancel (``POST /rollout/cancel``), and the
lifecycle part of ``GET /health``."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from osmosis_ai.rollout.types.sample import MessageDict, RolloutSample, finite_or_none, single_path_segment
from osmosis_ai.rollout.types.status import RolloutErrorCategory, RolloutStatus

POLLING_LEASE_HEADER = "X-Osmosis-Rollout-Lease"


class RolloutInitRequest(BaseModel):
    """A rollout submitted by the controller; ``chat_completions_url`` is a base URL (clients add
    ``/chat/completions``), ``grade=False`` skips the grader."""

    initial_messages: list[MessageDict]
    label: str | None = None
    metadata: dict[str, Any] | None = None
    rollout_id: str
    chat_completions_url: str
    llm_api_key: str | None = None
    grade: bool = True
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    extra_fields: dict[str, Any] | None = None

    @field_validator("rollout_id")
    @classmethod
    def _one_segment(cls, value: str) -> str:
        return single_path_segment(value)

    @field_validator("llm_api_key")
    @classmethod
    def _absent_or_set(cls, value: str | None) -> str | None:
        if value == "":
            raise ValueError("llm_api_key must be left out or a non-empty string")
        return value

    @field_validator("agent_timeout_sec", "grader_timeout_sec")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        return finite_or_none(value)


class RolloutInitResponse(BaseModel):
    """The 202 answer: the lease token to poll with and the server's polling timings (a lease lasts
    longer than one long poll)."""

    rollout_id: str
    status: RolloutStatus
    polling_lease_token: str = Field(min_length=1)
    result_wait_timeout_sec: float
    polling_lease_timeout_sec: float

    @model_validator(mode="after")
    def _lease_outlasts_a_poll(self) -> RolloutInitResponse:
        wait, lease = self.result_wait_timeout_sec, self.polling_lease_timeout_sec
        if not math.isfinite(wait) or wait <= 0:
            raise ValueError("result_wait_timeout_sec must be a positive finite number")
        if not math.isfinite(lease) or lease <= wait:
            raise ValueError(
                "polling_lease_timeout_sec must be finite and longer than result_wait_timeout_sec"
            )
        return self


class RolloutResultResponse(BaseModel):
    """A poll's answer: the status, and once finished the sample and, on failure, why."""

    rollout_id: str
    status: RolloutStatus
    sample: RolloutSample | None = None
    err_message: str | None = None
    err_category: RolloutErrorCategory | None = None


class CancelRolloutsRequest(BaseModel):
    """Which rollouts to cancel: exactly one of ``ids``, ``prefix`` or ``all=True``."""

    ids: list[str] | None = None
    prefix: str | None = None
    all: bool = False


class CancelRolloutsResponse(BaseModel):
    """Per rollout id: ``cancelled_queued``, ``cancelled_running`` or ``not_found``."""

    dispositions: dict[str, str]


class RolloutLifecycle(BaseModel):
    """Whether the server admits rollouts now, and how many it has not finished."""

    accepting_rollouts: bool
    active_rollouts: int = Field(ge=0)
