"""Four classic reward functions, validated by ``@osmosis_reward``.

A classic reward takes the model output (``solution_str``), the reference answer (``ground_truth``)
and optional per-sample settings (``extra_info``), and returns a float score. The decorator checks
the signature when this module is imported and the score on every call; ``**kwargs`` keeps a
function working when the platform passes extra keywords.

Run ``python examples/reward_functions.py`` to see them score a few answers.
"""

from __future__ import annotations

from typing import Any

from osmosis_ai import osmosis_reward


@osmosis_reward
def exact_match_reward(
    solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> float:
    """1.0 when the answer equals the reference, ignoring surrounding whitespace, else 0.0."""
    return 1.0 if solution_str.strip() == ground_truth.strip() else 0.0


@osmosis_reward
def case_insensitive_reward(
    solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> float:
    """1.0 for a case-insensitive match.

    With ``extra_info={"partial_credit": True}``, a near miss whose length differs from the
    reference by at most two characters earns 0.5.
    """
    answer, reference = solution_str.strip().lower(), ground_truth.strip().lower()
    if answer == reference:
        return 1.0
    if (extra_info or {}).get("partial_credit") and abs(len(answer) - len(reference)) <= 2:
        return 0.5
    return 0.0


@osmosis_reward
def numeric_tolerance_reward(
    solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> float:
    """1.0 when both parse as numbers within ``extra_info["tolerance"]`` (default 0.01), else 0.0."""
    tolerance = float((extra_info or {}).get("tolerance", 0.01))
    try:
        answer, reference = float(solution_str.strip()), float(ground_truth.strip())
    except ValueError:
        return 0.0
    return 1.0 if abs(answer - reference) <= tolerance else 0.0


@osmosis_reward
def minimal_reward(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """The smallest valid reward: 1.0 if the reference appears anywhere in the answer."""
    return float(ground_truth in solution_str)


def main() -> None:
    cases = [
        (exact_match_reward, "Paris", "Paris", None),
        (exact_match_reward, "paris", "Paris", None),
        (case_insensitive_reward, "PARIS", "Paris", None),
        (case_insensitive_reward, "Pariss", "Paris", {"partial_credit": True}),
        (numeric_tolerance_reward, "3.14159", "3.14", None),
        (numeric_tolerance_reward, "3.2", "3.14", {"tolerance": 0.1}),
        (numeric_tolerance_reward, "pi", "3.14", None),
        (minimal_reward, "The answer is 42.", "42", None),
    ]
    for reward, answer, reference, extra_info in cases:
        score = reward(answer, reference, extra_info)
        print(f"{reward.__name__:<26} {answer!r:<22} vs {reference!r:<8} extra_info={extra_info} -> {score}")


if __name__ == "__main__":
    main()
