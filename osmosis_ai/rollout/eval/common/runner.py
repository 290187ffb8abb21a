"""0.2 import path of the tool-list check; the runner itself is :class:`osmosis_ai.evaluation.LocalRunner`."""

from __future__ import annotations

from osmosis_ai.evaluation.runner import validate_tools

__all__ = ["validate_tools"]
