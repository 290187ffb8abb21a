"""The command line's own error. Libraries raise their typed errors; only ``osmosis_ai/cli/`` raises this."""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError


class CLIError(OsmosisError):
    """A command-line action cannot proceed. The message is shown to the user as ``Error: <message>``."""


class UsageError(CLIError):
    """A malformed command line that a command finds itself (a required option of a command with
    sub-commands, which argparse cannot require): ``main`` reports it as argparse reports its own,
    with the command's usage and exit status 2."""
