"""Reward functions: the ``@osmosis_reward`` and ``@osmosis_rubric`` validating decorators.

Importing this package loads only the standard library and stays cheap; the heavier inspection
machinery (``inspect``, ``typing``) is imported the first time a function is decorated.
"""

from __future__ import annotations

from osmosis_ai.rewards.decorators import osmosis_reward, osmosis_rubric

__all__ = ["osmosis_reward", "osmosis_rubric"]
