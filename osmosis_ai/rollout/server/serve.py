"""The serving constants and :class:`ServeError`; ``serve_agent_loop`` and ``validate_and_report`` are
re-exported from the ``osmosis serve``/``osmosis validate`` commands that implement them
(:mod:`osmosis_ai.cli.commands.serve`), because they print."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from osmosis_ai._lazy import lazy_exports
from osmosis_ai.errors import OsmosisError

logger = logging.getLogger(__name__)

DEFAULT_PORT = 9000
DEFAULT_HOST = "0.0.0.0"
LOCAL_HOST = "127.0.0.1"


class ServeError(OsmosisError):
    """The server cannot start as configured; the message says what to change."""


_EXPORTS = {
    "serve_agent_loop": "osmosis_ai.cli.commands.serve",
    "reloadable_app": "osmosis_ai.cli.commands.serve",
    "RELOAD_CONFIG_ENV": "osmosis_ai.cli.commands.serve",
    "validate_and_report": "osmosis_ai.cli.commands.validate",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    pass
