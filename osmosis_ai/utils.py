"""Import path of osmosis-ai 0.2 (``from osmosis_ai.utils import osmosis_reward``), kept working.

New code should import from ``osmosis_ai`` or ``osmosis_ai.rewards``.
"""

from __future__ import annotations

from osmosis_ai.rewards import osmosis_reward, osmosis_rubric

__all__ = ["osmosis_reward", "osmosis_rubric"]
