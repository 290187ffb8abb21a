"""Legacy import path of the tool-list check; the runner itself is the run engine (:mod:`osmosis_ai.runs`)."""

from __future__ import annotations

from osmosis_ai.runs.executors.local import _TOOL_NAME as TOOL_NAME_PATTERN
from osmosis_ai.runs.executors.local import validate_tools

__all__ = ["TOOL_NAME_PATTERN", "validate_tools"]
