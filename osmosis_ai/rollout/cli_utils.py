"""A compatibility import path: ``MODULE:ATTR`` loading lives in :mod:`osmosis_ai.cli.loading`."""

from osmosis_ai.cli.loading import load_agent_loop, load_attribute
from osmosis_ai.errors import CLIError

__all__ = ["CLIError", "load_agent_loop", "load_attribute"]
