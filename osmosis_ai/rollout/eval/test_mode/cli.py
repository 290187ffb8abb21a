"""Legacy import path of ``osmosis test``'s command class (see :mod:`osmosis_ai.cli.command_objects`)."""

from __future__ import annotations

from osmosis_ai.cli.command_objects import TestCommand

__all__ = ["TestCommand"]
