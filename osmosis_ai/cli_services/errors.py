"""Legacy import path of the command line's error, :class:`osmosis_ai.cli.errors.CLIError`."""

from __future__ import annotations

from osmosis_ai.cli.errors import CLIError

__all__ = ["CLIError"]
