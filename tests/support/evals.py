"""Eval functions for the ``osmosis eval`` tests."""

from __future__ import annotations

from typing import Any


def exact(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
    """1.0 when the answer is the ground truth, else 0.0."""
    return float(solution_str.strip() == ground_truth.strip())


def turns(messages: list[dict[str, Any]], ground_truth: str, metadata: dict[str, Any]) -> float:
    """The number of messages in the final conversation."""
    return float(len(messages))


def broken(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
    """Fails on rows whose mode column says so."""
    if extra_info.get("mode") == "break-eval":
        raise ValueError("the eval function broke on purpose")
    return 1.0


def exits(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
    """Calls ``sys.exit`` on rows whose mode column says ``exit-eval``, raises ``KeyboardInterrupt``
    on ``interrupt-eval``."""
    import sys

    if extra_info.get("mode") == "exit-eval":
        sys.exit(4)
    if extra_info.get("mode") == "interrupt-eval":
        raise KeyboardInterrupt
    return 1.0


def refusing(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
    """Raises when the answer is ``refuse`` (the run becomes a ``reward_error``); else as :func:`exact`."""
    if solution_str.strip() == "refuse":
        raise ValueError("the answer refused to be scored")
    return exact(solution_str, ground_truth, extra_info)
