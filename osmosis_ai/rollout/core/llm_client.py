"""The interface an agent's LLM client satisfies, so alternative clients can be injected into a context."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from osmosis_ai.rollout.core.schemas import MessageDict, RolloutMetrics

if TYPE_CHECKING:
    from osmosis_ai.rollout.client import CompletionsResult


@runtime_checkable
class LLMClientProtocol(Protocol):
    """What ``RolloutContext`` needs from an LLM client (``OsmosisLLMClient`` satisfies it)."""

    async def chat_completions(self, messages: list[MessageDict], **kwargs: Any) -> CompletionsResult:
        """Generate the next assistant message for the full conversation ``messages``."""
        ...

    def get_metrics(self) -> RolloutMetrics:
        """Return the LLM counters of this rollout (latency, calls, tokens)."""
        ...
