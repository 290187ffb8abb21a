"""The 0.3 contexts: the ambient per-rollout ``RolloutContext`` (``get_rollout_context()``), the
``SampleSource`` an integration registers on it, and what ``AgentWorkflow.run`` and ``Grader.grade``
receive.

This ``RolloutContext`` is 0.3's; the 0.2 one (``osmosis_ai.rollout.RolloutContext``, handed to
``RolloutAgentLoop.run``) is a different class and stays where it was.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from osmosis_ai.rollout.types.config import AgentWorkflowConfig
from osmosis_ai.rollout.types.sample import RolloutSample
from osmosis_ai.rollout.types.status import RolloutStatus

TConfig = TypeVar("TConfig", bound=AgentWorkflowConfig)


class SampleSource(ABC):
    """Gives the rollout's one sample at grading time (an integration wraps its agent or session)."""

    @abstractmethod
    async def get_sample(self) -> RolloutSample:
        """The rollout's sample as it is now."""

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        """A snapshot of at most ``max_messages`` recent messages, without touching the live history;
        ``None`` when the source offers none."""
        return None


_current: ContextVar[RolloutContext | None] = ContextVar("osmosis_rollout_context", default=None)


@dataclass
class RolloutContext:
    """One rollout's ambient facts: the chat completions base URL (append ``/chat/completions``), the
    key to send it, the rollout id, and the sample source registered by the workflow.

    The server enters it around the workflow, so ``get_rollout_context()`` finds it from any code the
    workflow calls. ``preview_enabled`` is accepted for 0.3 code; this server writes no previews.
    """

    chat_completions_url: str = ""
    api_key: str | None = None
    rollout_id: str = ""
    sample_source: SampleSource | None = None
    process_id: str | None = None
    preview_enabled: bool = True
    on_status: Callable[[RolloutStatus], Awaitable[None]] | None = field(default=None, repr=False)
    _tokens: list[Token[RolloutContext | None]] = field(default_factory=list, init=False, repr=False)

    def __enter__(self) -> RolloutContext:
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *_: object) -> None:
        _current.reset(self._tokens.pop())

    def set_sample_source(self, source: SampleSource) -> None:
        """Register the rollout's one sample source; a second one is a mistake (``ValueError``)."""
        if self.sample_source is not None:
            raise ValueError(
                "this rollout already has a sample source: a rollout produces one sample, so create "
                "one agent or session per rollout"
            )
        self.sample_source = source

    async def get_sample(self) -> RolloutSample | None:
        """The registered source's sample, or ``None`` when the workflow registered none."""
        return None if self.sample_source is None else await self.sample_source.get_sample()

    async def set_status(self, status: RolloutStatus) -> None:
        """Report the rollout's progress to whoever polls it."""
        if self.on_status is not None:
            await self.on_status(status)


def get_rollout_context() -> RolloutContext | None:
    """The context of the rollout this code runs in, or ``None`` outside one."""
    return _current.get()


@dataclass
class GraderContext:
    """What ``Grader.grade`` receives: the row's ``label``, the workflow's ``sample``, the row's
    ``metadata``; ``set_reward`` sets the sample's one reward."""

    label: str | None = None
    sample: RolloutSample | None = None
    project_path: str | None = None
    metadata: dict[str, Any] | None = None
    artifacts_dir: Path | None = None

    def set_reward(self, reward: float) -> None:
        if self.sample is None:
            raise ValueError("there is no sample to reward: the workflow produced none")
        self.sample.reward = reward


@dataclass
class AgentWorkflowContext(Generic[TConfig]):
    """What ``AgentWorkflow.run`` receives: the input messages (``prompt``), the workflow's config
    (a private copy per rollout) and the row's metadata."""

    prompt: list[dict[str, Any]]
    config: TConfig | None = None
    metadata: dict[str, Any] | None = None
    artifacts_dir: Path | None = None
