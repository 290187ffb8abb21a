"""``Grader``: the 0.3 unit of reward code, one ``grade`` per successful rollout."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from osmosis_ai.rollout.context import GraderContext
from osmosis_ai.rollout.types.config import GraderConfig


class Grader(ABC):
    """Subclass it and write ``async grade(ctx)``, calling ``ctx.set_reward(x)``; a fresh instance
    grades each rollout. A grader that raises, or leaves the sample without a reward, fails the
    rollout with a typed error: the rollout is never given a reward it was not graded with."""

    def __init__(self, config: GraderConfig | None = None) -> None:
        self.config = config

    @abstractmethod
    async def grade(self, ctx: GraderContext) -> Any:
        raise NotImplementedError
