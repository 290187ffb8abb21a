"""Compatibility path: ``from osmosis_ai.utils import osmosis_reward`` (docs/compatibility.md).

New code imports from ``osmosis_ai`` or ``osmosis_ai.rewards``.
"""

from __future__ import annotations

from osmosis_ai.rewards import osmosis_reward, osmosis_rubric

__all__ = ["osmosis_reward", "osmosis_rubric"]
