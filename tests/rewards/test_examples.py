"""``examples/reward_functions.py``: the four classic rewards score as documented and the script runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reward_functions.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reward_functions_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (function, solution_str, ground_truth, extra_info, score)
CASES: list[tuple[str, str, str, dict[str, Any] | None, float]] = [
    ("exact_match_reward", "Paris", "Paris", None, 1.0),
    ("exact_match_reward", "  Paris\n", "Paris", None, 1.0),
    ("exact_match_reward", "paris", "Paris", None, 0.0),
    ("case_insensitive_reward", "PARIS", "Paris", None, 1.0),
    ("case_insensitive_reward", "Pariss", "Paris", None, 0.0),
    ("case_insensitive_reward", "Pariss", "Paris", {"partial_credit": True}, 0.5),
    ("case_insensitive_reward", "Par", "Paris", {"partial_credit": True}, 0.5),
    ("case_insensitive_reward", "Pa", "Paris", {"partial_credit": True}, 0.0),
    ("numeric_tolerance_reward", "3.145", "3.14", None, 1.0),
    ("numeric_tolerance_reward", "3.2", "3.14", None, 0.0),
    ("numeric_tolerance_reward", "3.2", "3.14", {"tolerance": 0.1}, 1.0),
    ("numeric_tolerance_reward", "pi", "3.14", None, 0.0),
    ("minimal_reward", "The answer is 42.", "42", None, 1.0),
    ("minimal_reward", "The answer is 41.", "42", None, 0.0),
]


@pytest.mark.parametrize(("name", "solution", "truth", "extra_info", "score"), CASES)
def test_example_rewards_score(
    example: ModuleType, name: str, solution: str, truth: str, extra_info: dict[str, Any] | None, score: float
) -> None:
    reward = getattr(example, name)
    result = reward(solution, truth, extra_info, data_source="demo")
    assert type(result) is float
    assert result == score


def test_example_script_prints_its_cases() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 8
    assert lines[0].startswith("exact_match_reward") and lines[0].endswith("-> 1.0")
    assert "Traceback" not in done.stderr
