"""The ``osmosis`` command line. ``osmosis_ai.cli:main`` is the console-script entry point."""

from osmosis_ai.cli.main import main

__all__ = ["main"]
