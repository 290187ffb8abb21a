"""The command line's own error. Libraries raise their typed errors; only ``osmosis_ai/cli/`` raises this."""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError


class CLIError(OsmosisError):
    """A command-line action cannot proceed. The message is shown to the user as ``Error: <message>``."""


class UsageError(CLIError):
    """A malformed command line that a command finds itself (a required option of a command with
    sub-commands, which argparse cannot require): ``main`` reports it as argparse reports its own,
    with the command's usage and exit status 2."""


NAMES_0_2 = ("CLIError",)
"""The names 0.2 exported of this module at its own paths (``osmosis_ai.cli_services``, its ``errors``,
``osmosis_ai.rollout.cli``): the alias table (:mod:`osmosis_ai._compat`) serves them from here."""
