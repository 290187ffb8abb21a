"""Rollout settings (pydantic-settings): env prefixes ``OSMOSIS_ROLLOUT_``, ``..._CLIENT_``, ``..._SERVER_``."""

from __future__ import annotations

from osmosis_ai.rollout.config.settings import (
    RolloutClientSettings,
    RolloutServerSettings,
    RolloutSettings,
    configure,
    get_settings,
    reset_settings,
)

__all__ = [
    "RolloutClientSettings",
    "RolloutServerSettings",
    "RolloutSettings",
    "configure",
    "get_settings",
    "reset_settings",
]
