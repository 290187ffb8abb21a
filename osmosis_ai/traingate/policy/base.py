"""What a policy backend is: something that answers a conversation with one assistant message."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]


@dataclass
class Generation:
    """One completion from a policy.

    Token fields are ``None`` when the backend does not report them; the gateway then derives ids
    from its tokenizer. ``usage`` likewise falls back to the token counts the gateway computes.
    """

    message: Message
    finish_reason: str = "stop"
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    usage: dict[str, int] | None = None


class Policy(abc.ABC):
    """A policy backend. Implementations are built once per run and shared by every rollout.

    ``deterministic`` policies choose every token with probability 1, so the gateway reports a
    log-probability of 0.0 per token for them instead of "unknown".
    """

    name: str = "policy"
    deterministic: bool = False

    @abc.abstractmethod
    async def generate(
        self, messages: list[Message], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        """Answer ``messages`` given the rollout's ``tools`` and the request's sampling ``params``."""

    async def preflight(self) -> None:
        """Check, before any rollout runs, that the backend can answer at all.

        Raises :class:`~osmosis_ai.models.errors.ProviderCheckError` when it cannot (bad key,
        unknown model, endpoint down). The default has nothing to check.
        """
        return None

    async def aclose(self) -> None:
        """Release backend resources (connection pools). The default has nothing to release."""
        return None
