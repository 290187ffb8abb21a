"""``AgentWorkflowOutput``: what ``AgentWorkflow.run`` may return."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

Messages = list[dict[str, Any]]


class AgentWorkflowOutput(BaseModel):
    """The workflow's conversation (``messages``; ``None``: it produced none), numeric ``metrics``
    carried into the sample, and ``info`` for the workflow's own use (not passed to graders)."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid", allow_inf_nan=False, revalidate_instances="always"
    )

    messages: Messages | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


def as_output(value: Any) -> AgentWorkflowOutput | None:
    """``run()``'s return value as an output: a message list becomes its ``messages``; ``None`` stays
    ``None`` (the sample then comes from the rollout context's sample source)."""
    if value is None:
        return None
    if isinstance(value, AgentWorkflowOutput):
        return AgentWorkflowOutput.model_validate(value)
    if isinstance(value, list):
        return AgentWorkflowOutput(messages=value)
    raise TypeError(
        f"AgentWorkflow.run() returned {type(value).__name__}; return an AgentWorkflowOutput, "
        "a list of messages, or None"
    )
