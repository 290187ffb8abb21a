"""The command line's own error. Libraries raise their typed errors; only ``osmosis_ai/cli/`` raises this."""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError


class CLIError(OsmosisError):
    """A command-line action cannot proceed. The message is shown to the user as ``Error: <message>``."""
