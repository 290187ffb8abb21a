"""The scripted policy: the offline calculator solver of :mod:`osmosis_ai.models.scripted` as a TrainGate policy."""

from __future__ import annotations

from typing import Any

from osmosis_ai.models.scripted import find_expression, reply
from osmosis_ai.traingate.policy.base import Generation, Message, Policy

__all__ = ["ScriptedPolicy", "find_expression"]


class ScriptedPolicy(Policy):
    """Deterministic calculator solver (see :mod:`osmosis_ai.models.scripted`)."""

    name = "scripted"
    deterministic = True

    async def generate(
        self, messages: list[Message], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        message, finish_reason = reply(messages, tools)
        return Generation(message, finish_reason=finish_reason)
