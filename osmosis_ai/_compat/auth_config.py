"""0.2's ``osmosis_ai.auth.config``: the configuration names. ``PLATFORM_URL``, ``CONFIG_DIR``
and ``CREDENTIALS_FILE`` are read from the environment each time they are looked up (see
:mod:`osmosis_ai.auth.settings`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.auth import settings
from osmosis_ai.auth.settings import CALLBACK_PORTS, DEFAULT_PLATFORM_URL, DEFAULT_TOKEN_EXPIRY_DAYS
from osmosis_ai.auth.store import FORMAT_VERSION as CREDENTIALS_VERSION

LOCAL_SERVER_PORT_START = CALLBACK_PORTS.start
LOCAL_SERVER_PORT_END = CALLBACK_PORTS.stop - 1  # inclusive

__all__ = [
    "CALLBACK_PORTS",
    "CONFIG_DIR",
    "CREDENTIALS_FILE",
    "CREDENTIALS_VERSION",
    "DEFAULT_PLATFORM_URL",
    "DEFAULT_TOKEN_EXPIRY_DAYS",
    "LOCAL_SERVER_PORT_END",
    "LOCAL_SERVER_PORT_START",
    "PLATFORM_URL",
]

if TYPE_CHECKING:  # resolved by __getattr__ at each lookup
    PLATFORM_URL: str
    CONFIG_DIR: Path
    CREDENTIALS_FILE: Path

_DYNAMIC = {
    "PLATFORM_URL": settings.platform_url,
    "CONFIG_DIR": settings.config_dir,
    "CREDENTIALS_FILE": settings.credentials_file,
}


def __getattr__(name: str) -> Any:
    resolve = _DYNAMIC.get(name)
    if resolve is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return resolve()
