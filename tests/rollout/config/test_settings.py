"""Settings: names, defaults, ranges, environment prefixes, ``.env`` files and the singleton."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from osmosis_ai.rollout.config import (
    RolloutClientSettings,
    RolloutServerSettings,
    RolloutSettings,
    configure,
    get_settings,
    reset_settings,
)
from osmosis_ai.rollout.core.exceptions import RolloutValueError

CLIENT_DEFAULTS = {
    "timeout_seconds": 300.0,
    "max_retries": 3,
    "complete_rollout_retries": 2,
    "retry_base_delay": 1.0,
    "retry_max_delay": 30.0,
    "max_connections": 100,
    "max_keepalive_connections": 20,
    "connect_timeout_seconds": 10.0,
}
SERVER_DEFAULTS = {
    "max_concurrent_rollouts": 100,
    "record_ttl_seconds": 3600.0,
    "cleanup_interval_seconds": 60.0,
    "request_timeout_seconds": 600.0,
    "registration_readiness_timeout_seconds": 10.0,
    "registration_readiness_poll_interval_seconds": 0.2,
    "registration_shutdown_timeout_seconds": 30.0,
    "max_queued_rollouts": None,  # new: unlimited, as 0.2
    "shutdown_grace_seconds": 10.0,  # new
    "abandon_grace_seconds": 10.0,  # new
    "delivery_window_seconds": 900.0,  # new
    "outbox_path": None,  # new: in memory; osmosis serve picks a file
    "outbox_max_age_seconds": 3600.0,  # new
    "header_timeout_seconds": 10.0,  # new
    "max_head_bytes": 16384,  # new
    "max_headers": 100,  # new
    "owner_lease_seconds": 10.0,  # new
}
# (class, field, lowest valid, highest valid, below, above)
RANGES: list[tuple[type[Any], str, Any, Any, Any, Any]] = [
    (RolloutServerSettings, "shutdown_grace_seconds", 0, 3600, -0.1, 3601),
    (RolloutServerSettings, "abandon_grace_seconds", 0, 600, -0.1, 601),
    (RolloutServerSettings, "delivery_window_seconds", 1, 86400, 0.5, 86401),
    (RolloutServerSettings, "header_timeout_seconds", 0.1, 600, 0.05, 601),
    (RolloutServerSettings, "outbox_max_age_seconds", 60, 604800, 59, 604801),
    (RolloutServerSettings, "max_head_bytes", 1024, 1048576, 1023, 1048577),
    (RolloutServerSettings, "max_headers", 10, 10000, 9, 10001),
    (RolloutServerSettings, "owner_lease_seconds", 1.0, 600.0, 0.5, 601.0),
    (RolloutClientSettings, "timeout_seconds", 1, 3600, 0.99, 3601),
    (RolloutClientSettings, "max_retries", 0, 10, -1, 11),
    (RolloutClientSettings, "complete_rollout_retries", 0, 10, -1, 11),
    (RolloutClientSettings, "retry_base_delay", 0.1, 60, 0.09, 61),
    (RolloutClientSettings, "retry_max_delay", 1, 300, 0.5, 301),
    (RolloutClientSettings, "max_connections", 1, 1000, 0, 1001),
    (RolloutClientSettings, "max_keepalive_connections", 1, 100, 0, 101),
    (RolloutServerSettings, "max_concurrent_rollouts", 1, 10000, 0, 10001),
    (RolloutServerSettings, "record_ttl_seconds", 60, 86400, 59, 86401),
    (RolloutServerSettings, "cleanup_interval_seconds", 10, 3600, 9, 3601),
    (RolloutServerSettings, "request_timeout_seconds", 10, 3600, 9, 3601),
    (RolloutServerSettings, "request_timeout_seconds", 0, 3600, -1, 3601),  # 0: no deadline (new)
    (RolloutServerSettings, "registration_readiness_timeout_seconds", 1, 60, 0.5, 61),
    (RolloutServerSettings, "registration_readiness_poll_interval_seconds", 0.05, 5, 0.04, 6),
    (RolloutServerSettings, "registration_shutdown_timeout_seconds", 1, 300, 0.5, 301),
    (RolloutSettings, "max_metadata_size_bytes", 1024, 104857600, 1023, 104857601),
]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for key in list(os.environ):
        if key.startswith("OSMOSIS_ROLLOUT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no stray .env from the working tree
    reset_settings()
    yield
    reset_settings()


def test_defaults() -> None:
    settings = RolloutSettings()
    assert settings.client.model_dump() == CLIENT_DEFAULTS
    assert settings.server.model_dump() == SERVER_DEFAULTS
    assert settings.max_metadata_size_bytes == 1048576


@pytest.mark.parametrize(("cls", "field", "low", "high", "below", "above"), RANGES)
def test_ranges(cls: type[Any], field: str, low: Any, high: Any, below: Any, above: Any) -> None:
    assert getattr(cls(**{field: low}), field) == low
    assert getattr(cls(**{field: high}), field) == high
    for bad in (below, above):
        with pytest.raises(ValidationError):
            cls(**{field: bad})


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_CLIENT_TIMEOUT_SECONDS", "12.5")
    monkeypatch.setenv("OSMOSIS_ROLLOUT_CLIENT_MAX_RETRIES", "0")
    monkeypatch.setenv("osmosis_rollout_client_max_connections", "42")  # case-insensitive
    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_MAX_CONCURRENT_ROLLOUTS", "7")
    monkeypatch.setenv("OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES", "2048")
    monkeypatch.setenv("OSMOSIS_ROLLOUT_CLIENT_UNKNOWN_THING", "ignored")
    settings = get_settings()
    assert (
        settings.client.timeout_seconds,
        settings.client.max_retries,
        settings.client.max_connections,
    ) == (12.5, 0, 42)
    assert settings.server.max_concurrent_rollouts == 7
    assert settings.max_metadata_size_bytes == 2048


def test_out_of_range_environment_value_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_RECORD_TTL_SECONDS", "1")
    with pytest.raises(ValidationError, match="record_ttl_seconds"):
        RolloutSettings()


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "OSMOSIS_ROLLOUT_SERVER_MAX_CONCURRENT_ROLLOUTS",
            "0",
            "OSMOSIS_ROLLOUT_SERVER_MAX_CONCURRENT_ROLLOUTS='0': Input should be greater than or equal to 1; "
            "allowed: int from 1 to 10000",
        ),
        (
            "OSMOSIS_ROLLOUT_CLIENT_TIMEOUT_SECONDS",
            "soon",
            "OSMOSIS_ROLLOUT_CLIENT_TIMEOUT_SECONDS='soon': Input should be a valid number, unable to parse "
            "string as a number; allowed: float from 1.0 to 3600.0",
        ),
    ],
)
def test_get_settings_names_a_bad_environment_value_in_one_line(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(RolloutValueError) as caught:
        get_settings()
    assert str(caught.value) == expected


def test_dotenv_file_in_working_directory(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "OSMOSIS_ROLLOUT_CLIENT_RETRY_BASE_DELAY=0.5\nOSMOSIS_ROLLOUT_SERVER_CLEANUP_INTERVAL_SECONDS=15\nOTHER=1\n",
        encoding="utf-8",
    )
    settings = RolloutSettings()
    assert settings.client.retry_base_delay == 0.5
    assert settings.server.cleanup_interval_seconds == 15


def test_singleton_configure_and_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    first = get_settings()
    assert get_settings() is first
    custom = RolloutSettings(client=RolloutClientSettings(max_retries=9))
    configure(custom)
    assert get_settings() is custom
    reset_settings()
    monkeypatch.setenv("OSMOSIS_ROLLOUT_CLIENT_MAX_RETRIES", "5")
    assert get_settings().client.max_retries == 5
