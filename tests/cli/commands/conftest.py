"""Fixtures for the command tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home directory for an isolated user (``osmosis(..., home=home)``)."""
    path = tmp_path / "home"
    path.mkdir()
    return path
