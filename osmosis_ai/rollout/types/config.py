"""Configuration objects a 0.3 workflow or grader is constructed with."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


class ConcurrencyConfig(BaseModel):
    """``max_concurrent``: rollouts of this workflow run at once (``None``: the server's limit)."""

    max_concurrent: int | None = Field(default=None, ge=1)


class BaseConfig(BaseModel):
    """A named configuration; extra fields are kept, so a project adds its own settings freely."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="allow", validate_assignment=True, arbitrary_types_allowed=True
    )

    name: str
    description: str | None = None


class AgentWorkflowConfig(BaseConfig):
    """The configuration an ``AgentWorkflow`` receives (``ctx.config``, ``self.config``)."""

    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)


class GraderConfig(BaseConfig):
    """The configuration a ``Grader`` receives (``self.config``)."""

    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
