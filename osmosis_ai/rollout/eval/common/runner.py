"""0.2 import path of the tool-list check; the runner itself is :class:`osmosis_ai.evaluation.LocalRunner`."""

from __future__ import annotations

from osmosis_ai.evaluation.runner import _TOOL_NAME as TOOL_NAME_PATTERN
from osmosis_ai.evaluation.runner import validate_tools

__all__ = ["TOOL_NAME_PATTERN", "validate_tools"]
