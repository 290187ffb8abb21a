"""The 0.3 vocabularies: a rollout's status (in flight and terminal) and a failure's category."""

from __future__ import annotations

from enum import Enum


class _Text(str, Enum):
    """A string enum that prints as its value on every supported Python (``enum.StrEnum`` is 3.11+)."""

    def __str__(self) -> str:
        return str(self.value)


class RolloutStatus(_Text):
    """Where a 0.3 rollout is: ``queued``, ``running``, ``grading`` while in flight; ``success``,
    ``failure``, ``cancelled`` once finished; ``unknown`` when nobody can tell.

    Not the 0.2 ``osmosis_ai.rollout.RolloutStatus`` (``COMPLETED``/``ERROR``), which stays where it was.
    """

    QUEUED = "queued"
    RUNNING = "running"
    GRADING = "grading"
    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"


FINISHED = frozenset({RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED})


class RolloutErrorCategory(_Text):
    """Why a 0.3 rollout failed, as the controller sorts failures."""

    TIMEOUT = "timeout"
    LEASE_EXPIRED = "lease_expired"
    VALIDATION_ERROR = "validation_error"
    HTTP_ERROR = "http_error"
    AGENT_ERROR = "agent_error"
    INTERNAL_ERROR = "internal_error"


def category_of(exc: BaseException) -> RolloutErrorCategory:
    """The wire category of an exception raised by a workflow or grader: ``internal_error`` for an
    :class:`~osmosis_ai.errors.InfrastructureError` (the machinery failed, not the graded work)."""
    from osmosis_ai.errors import InfrastructureError

    if isinstance(exc, InfrastructureError):
        return RolloutErrorCategory.INTERNAL_ERROR
    if isinstance(exc, TimeoutError):
        return RolloutErrorCategory.TIMEOUT
    if isinstance(exc, (ValueError, TypeError, AssertionError)):
        return RolloutErrorCategory.VALIDATION_ERROR
    return RolloutErrorCategory.AGENT_ERROR
