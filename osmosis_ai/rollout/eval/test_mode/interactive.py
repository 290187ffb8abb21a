"""Legacy import path of the step-by-step model client; it is :mod:`osmosis_ai.evaluation.interactive`."""

from __future__ import annotations

from osmosis_ai.evaluation.interactive import InteractiveLLMClient, InteractiveStep

__all__ = ["InteractiveLLMClient", "InteractiveStep"]
