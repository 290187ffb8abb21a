"""Reward functions loaded by the CLI tests through ``--reward tests.support.rewards:<name>``."""

from __future__ import annotations


def answer_length(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """Trainer-side reward that differs from the agent's: the length of the final answer text."""
    return float(len(solution_str))


def contains(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """1.0 when the ground truth appears anywhere in the answer (``osmosis regrade`` tests)."""
    return float(str(ground_truth).strip() in solution_str)


def stalls(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """:func:`contains`, except that with ``REGRADE_STALL=ROW`` set it never returns for that row,
    having first created ``stalled`` in the working directory (for a test that kills the run there)."""
    import os
    import threading

    row = os.environ.get("REGRADE_STALL")
    if row is not None and str((extra_info or {}).get("row")) == row:
        open("stalled", "w").close()
        threading.Event().wait()
    return contains(solution_str, ground_truth, extra_info)
