"""Every auth test runs against its own stand-in Platform, with an empty config directory and no
token in the environment."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.platform import StandInPlatform, assert_no_token


@pytest.fixture
def platform(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> Iterator[StandInPlatform]:
    """A stand-in Platform; afterwards, no token it issued may appear in any log record (DEBUG
    included) or anything written to stdout/stderr during the test."""
    caplog.set_level(logging.DEBUG)
    stand_in = StandInPlatform().start()
    yield stand_in
    stand_in.stop()
    out, err = capfd.readouterr()
    assert_no_token(stand_in, caplog.text + out + err)


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "config" / "osmosis"
    monkeypatch.setenv("OSMOSIS_CONFIG_DIR", str(directory))
    monkeypatch.delenv("OSMOSIS_TOKEN", raising=False)
    monkeypatch.delenv("OSMOSIS_ACCESS_TOKEN", raising=False)
    monkeypatch.setenv("OSMOSIS_KEYRING", "0")  # never the developer's own OS keyring
    return directory


@pytest.fixture
def on_platform(
    platform: StandInPlatform, config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> StandInPlatform:
    """The stand-in, configured as the Platform the library talks to."""
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", platform.url)
    return platform
