"""Legacy import path of ``pass_at_k``; it is :func:`osmosis_ai.evaluation.statistics.pass_at_k`."""

from __future__ import annotations

from osmosis_ai.evaluation.statistics import pass_at_k

__all__ = ["pass_at_k"]
