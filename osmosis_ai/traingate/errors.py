"""Errors of the local TrainGate, rooted at :class:`TrainGateError`.

:class:`DatasetError` belongs to the dataset reader and is re-exported here, where callers have
imported it from. The whole tree is drawn in :mod:`osmosis_ai.errors`.
"""

from __future__ import annotations

from osmosis_ai.errors import DatasetError, OsmosisError

__all__ = ["DatasetError", "PolicyError", "TrainGateError"]


class TrainGateError(OsmosisError):
    """The local TrainGate cannot do what was asked; the message says why and what to do."""


class PolicyError(TrainGateError):
    """The policy backend failed to produce a completion (provider error, malformed answer).

    ``retryable`` says whether asking again may help (rate limits, timeouts, 5xx) or not (bad key,
    unknown model, context too long); the gateway answers 502 or 400 accordingly, so the agent's
    client retries only what can succeed.
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable
