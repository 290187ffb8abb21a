"""A compatibility import path: the console helpers live in :mod:`osmosis_ai.cli.output`."""

from osmosis_ai.cli.output import RICH_AVAILABLE, Console, console

__all__ = ["RICH_AVAILABLE", "Console", "console"]
