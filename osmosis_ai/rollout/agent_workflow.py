"""``AgentWorkflow``: the 0.3 unit of agent code, one ``run`` per rollout."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic

from osmosis_ai.rollout.context import AgentWorkflowContext, TConfig
from osmosis_ai.rollout.types.output import AgentWorkflowOutput, Messages


class AgentWorkflow(ABC, Generic[TConfig]):
    """Subclass it and write ``async run(ctx)``; a fresh instance runs each rollout.

    ``run`` returns an ``AgentWorkflowOutput``, a bare message list (its ``messages``), or ``None``
    (the sample then comes from the source registered on ``get_rollout_context()``).
    """

    def __init__(self, config: TConfig | None = None) -> None:
        self.config = config

    @abstractmethod
    async def run(self, ctx: AgentWorkflowContext[TConfig]) -> AgentWorkflowOutput | Messages | None:
        raise NotImplementedError
