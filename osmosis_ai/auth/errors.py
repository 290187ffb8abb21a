"""Errors of Platform login and credentials, rooted at :class:`AuthError`.

Messages never contain a token: they name the workspace, the Platform URL and the command to run.
The whole tree is drawn in :mod:`osmosis_ai.errors`.
"""

from __future__ import annotations

from pathlib import Path

from osmosis_ai.errors import OsmosisError


class AuthError(OsmosisError):
    """Logging in, storing credentials or calling the Osmosis Platform failed."""


class LoginError(AuthError):
    """A login flow did not end with verified credentials (denied, timed out, bad callback, ...)."""


class PlatformURLError(AuthError, ValueError):
    """The Platform URL is unusable: not http(s), or plain http to a host that is not loopback."""


class CredentialsStoreError(AuthError):
    """The credentials file cannot be read or written (permissions, a corrupt file kept aside)."""


class UnreadableCredentialsError(CredentialsStoreError):
    """The credentials file could not be parsed; it was renamed to ``kept`` (never overwritten), so
    the next login starts a new one."""

    def __init__(self, message: str, *, kept: Path) -> None:
        super().__init__(message)
        self.kept = kept


class KeyringTokenError(CredentialsStoreError):
    """A workspace's token is kept in the OS keyring and cannot be read back (turned off, locked,
    failing, or the entry is gone); the message says how to unlock it or log in again."""


class PlatformAPIError(AuthError):
    """The Platform answered with an error status, an unreadable body, or not at all.

    ``status_code`` is ``None`` when there was no answer (the stored credentials are left alone then).
    """

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class AuthenticationExpiredError(AuthError):
    """No usable credentials: not logged in, expired, or rejected by the Platform (HTTP 401)."""
