"""What one 0.3 rollout produces (``RolloutSample``) and what a backend is asked to run and returns."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from osmosis_ai.rollout.types.status import RolloutErrorCategory, RolloutStatus

MessageDict = dict[str, Any]


_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def single_path_segment(value: str, what: str = "rollout_id") -> str:
    """``value`` when it is one path segment (it names files and URL paths); ``ValueError`` otherwise."""
    plain = value not in ("", ".", "..") and (
        _PLAIN.issuperset(value)  # the usual id, checked without building two paths per request
        or (
            "\x00" not in value
            and PurePosixPath(value).name == value
            and PureWindowsPath(value).name == value
        )
    )
    if not plain:
        raise ValueError(f"{what} must be one path segment: not empty, '.' or '..', without '/' or '\\'")
    return value


def finite_or_none(value: float | None) -> float | None:
    """A deadline: a finite number of seconds, or ``None`` for none (``inf``/``nan`` are refused)."""
    if value is not None and not math.isfinite(value):
        raise ValueError("a timeout must be a finite number of seconds; leave it out for no deadline")
    return value


class RolloutSample(BaseModel):
    """The one conversation a rollout produced and its grading: ``reward`` is set by the grader.

    ``trajectory_messages`` defaults to a copy of ``messages`` (give ``None`` to keep none);
    ``remove_sample`` asks the trainer to leave the sample out. The reward must be finite, also when
    assigned later (``GraderContext.set_reward``).
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(allow_inf_nan=False, validate_assignment=True)

    messages: Sequence[Mapping[str, Any]] = Field(default_factory=list)
    trajectory_messages: Sequence[Mapping[str, Any]] | None = None
    label: str | None = None
    reward: float | None = None
    remove_sample: bool = False
    metrics: dict[str, Any] = Field(default_factory=dict)
    extra_fields: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _copy_messages_for_the_trajectory(self) -> RolloutSample:
        if "trajectory_messages" not in self.model_fields_set:
            self.__dict__["trajectory_messages"] = copy.deepcopy(list(self.messages))
            # set from here on, as 0.3's assignment makes it: the sample passed into another model,
            # or a reward assigned, keeps this copy instead of taking a new one each time
            self.model_fields_set.add("trajectory_messages")
        return self


class ExecutionRequest(BaseModel):
    """One rollout as a backend runs it: the prompt, the row's label and metadata, the deadlines."""

    id: str
    prompt: list[MessageDict]
    label: str | None = None
    metadata: dict[str, Any] | None = None
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    grade: bool = True

    @field_validator("id")
    @classmethod
    def _one_segment(cls, value: str) -> str:
        return single_path_segment(value)

    @field_validator("agent_timeout_sec", "grader_timeout_sec")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        return finite_or_none(value)


class ExecutionResult(BaseModel):
    """How one phase (workflow or grader) ended: its status, its sample, and on failure why."""

    status: RolloutStatus
    sample: RolloutSample | None = None
    err_message: str | None = None
    err_category: RolloutErrorCategory | None = None
