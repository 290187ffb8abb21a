"""Reward functions loaded by the CLI tests through ``--reward tests.support.rewards:<name>``."""

from __future__ import annotations


def answer_length(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """Trainer-side reward that differs from the agent's: the length of the final answer text."""
    return float(len(solution_str))
