"""The calculator's reward: 1.0 when the number after the last ``####`` equals the ground truth.

No ``from __future__ import annotations`` here: ``@osmosis_reward`` checks the real ``str``/``dict``
annotation objects of a classic reward signature, as in osmosis-ai 0.2.
"""

import re
from typing import Any

from osmosis_ai import osmosis_reward

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _final_answer(solution_str: str) -> float | None:
    _, marker, tail = solution_str.rpartition("####")
    if not marker:
        return None
    match = _NUMBER.search(tail)
    if match is None:
        return None
    try:
        return float(match.group().replace(",", ""))
    except ValueError:
        return None


@osmosis_reward
def calculator_reward(solution_str: str, ground_truth: str, extra_info: dict = None, **kwargs: Any) -> float:  # noqa: RUF013
    """Compare the final ``#### <number>`` answer with ``ground_truth`` numerically (tolerance 1e-6)."""
    answer = _final_answer(solution_str)
    if answer is None:
        return 0.0
    try:
        expected = float(str(ground_truth).replace(",", "").strip())
    except ValueError:
        return 0.0
    return 1.0 if abs(answer - expected) <= 1e-6 else 0.0
