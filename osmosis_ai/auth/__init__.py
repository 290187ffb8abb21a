"""Osmosis Platform login and credentials.

* :mod:`~osmosis_ai.auth.store` — the credentials file (0600, atomic, locked), workspaces per Platform;
  tokens go to the OS keyring instead when :mod:`~osmosis_ai.auth.os_keyring` finds a real one.
* :mod:`~osmosis_ai.auth.client` — calls to the Platform with the right token, and only to the
  Platform that issued it.
* Login flows: :mod:`~osmosis_ai.auth.browser` (loopback callback) and :mod:`~osmosis_ai.auth.device`
  (device code), both ending in :func:`~osmosis_ai.auth.session.complete_login`.
* ``config``, ``credentials``, ``flow``, ``local_server``, ``platform_client``: the 0.2 module names,
  served by :mod:`osmosis_ai._compat` (the functions 0.2 exported here live there too).

Names are resolved lazily, so importing the package costs nothing until one is used.
"""

from __future__ import annotations

from typing import Any

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "CredentialsStore": "osmosis_ai.auth.store",
    "WorkspaceCredentials": "osmosis_ai.auth.store",
    "UserInfo": "osmosis_ai.auth.store",
    "OrganizationInfo": "osmosis_ai.auth.store",
    "save_credentials": "osmosis_ai._compat.auth_credentials",
    "load_credentials": "osmosis_ai._compat.auth_credentials",
    "delete_credentials": "osmosis_ai._compat.auth_credentials",
    "delete_workspace_credentials": "osmosis_ai._compat.auth_credentials",
    "get_valid_credentials": "osmosis_ai._compat.auth_credentials",
    "get_all_workspaces": "osmosis_ai._compat.auth_credentials",
    "get_active_workspace": "osmosis_ai._compat.auth_credentials",
    "set_active_workspace": "osmosis_ai._compat.auth_credentials",
    "login": "osmosis_ai._compat.auth_flow",
    "device_login": "osmosis_ai.auth.device",
    "LoginResult": "osmosis_ai.auth.session",
    "platform_request": "osmosis_ai._compat.auth_platform_client",
    "resolve_credentials": "osmosis_ai.auth.client",
    "AuthError": "osmosis_ai.auth.errors",
    "LoginError": "osmosis_ai.auth.errors",
    "AuthenticationExpiredError": "osmosis_ai.auth.errors",
    "PlatformAPIError": "osmosis_ai.auth.errors",
    "PlatformURLError": "osmosis_ai.auth.errors",
    "CredentialsStoreError": "osmosis_ai.auth.errors",
    "KeyringTokenError": "osmosis_ai.auth.errors",
    "UnreadableCredentialsError": "osmosis_ai.auth.errors",
}

# Read from the environment at every lookup (never cached here).
_DYNAMIC = {
    "CONFIG_DIR": "config_dir",
    "CREDENTIALS_FILE": "credentials_file",
    "PLATFORM_URL": "platform_url",
}

__all__ = sorted([*_EXPORTS, *_DYNAMIC])

_lazy_getattr, _lazy_dir = lazy_exports(__name__, _EXPORTS, globals())


def __getattr__(name: str) -> Any:
    if name in _DYNAMIC:
        from osmosis_ai.auth import settings

        return getattr(settings, _DYNAMIC[name])()
    return _lazy_getattr(name)


def __dir__() -> list[str]:
    return sorted({*_lazy_dir(), *_DYNAMIC})
