"""Legacy import path of ``osmosis eval``'s command class (see :mod:`osmosis_ai.cli.command_objects`)."""

from __future__ import annotations

from osmosis_ai.cli.command_objects import EvalCommand

__all__ = ["EvalCommand"]
