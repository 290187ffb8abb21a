"""Fixtures for the command tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.platform import StandInPlatform


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home directory for an isolated user (``osmosis(..., home=home)``)."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def platform() -> Iterator[StandInPlatform]:
    """A stand-in Osmosis Platform of its own (see ``tests/support/platform.py``)."""
    stand_in = StandInPlatform().start()
    yield stand_in
    stand_in.stop()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """An empty config directory for the CLI's stored credentials."""
    return tmp_path / "config"
