"""Fixtures for the TrainGate tests: the calculator example's rows."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_ai.runs.dataset import DatasetReader
from tests.support.cli import CALCULATOR_DATASET


@pytest.fixture
def calculator_rows() -> list[dict[str, Any]]:
    return DatasetReader(CALCULATOR_DATASET).read()
