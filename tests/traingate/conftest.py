"""Fixtures for the TrainGate tests: the calculator example's rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osmosis_ai.traingate.dataset import load_dataset

CALCULATOR_DATASET = Path(__file__).resolve().parents[2] / "examples" / "calculator" / "dataset.jsonl"


@pytest.fixture
def calculator_rows() -> list[dict[str, Any]]:
    return load_dataset(CALCULATOR_DATASET)
