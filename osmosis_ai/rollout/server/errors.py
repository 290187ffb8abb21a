"""The errors the RolloutServer's modules share: the lowest module of the package, so that the one
raising an error and the one catching it never import each other for it."""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError


class ServeError(OsmosisError):
    """The server cannot start as configured; the message says what to change."""


class SharedStateUnavailable(OsmosisRolloutError):
    """The shared dedupe state cannot be reached now; the init is refused with 503 and ``Retry-After``."""
