"""The errors the RolloutServer's modules share: the lowest module of the package, so that the one
raising an error and the one catching it never import each other for it."""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError


class ServeError(OsmosisError):
    """The server cannot start as configured; the message says what to change."""


STARTUP_FAILURE_STATUS = 3
"""The exit status of a server process whose start-up failed: uvicorn's own (``uvicorn.run``)."""


class ServerStartError(ServeError):
    """The server was set up but did not start (the app's start-up failed); the reason is logged.

    ``osmosis serve`` ends with :data:`STARTUP_FAILURE_STATUS` for it.
    """


class SharedStateUnavailable(OsmosisRolloutError):
    """The shared dedupe state cannot be reached now; the init is refused with 503 and ``Retry-After``."""
