"""Access tokens in the OS keyring, when the optional ``keyring`` package finds a real backend.

The credentials file always works; the keyring is used on top of it only when ``keyring`` is
installed (``pip install 'osmosis-ai[keyring]'``), its active backend has a positive priority (so not
``keyring``'s "fail" or "null" backend, nor a chainer with nothing to chain), and ``OSMOSIS_KEYRING``
is not ``0``. The package is imported at the first token stored or read, never at start-up.

Every keyring failure is contained here: storing reports ``False`` (the caller keeps the token in the
file), reading raises :class:`KeyringTokenError` (the workspace needs a new login), deleting reports
``False``. Only the exception's class name is ever put in a message, since a backend's own text is
not ours to vouch for.
"""

from __future__ import annotations

import os
from typing import Any

from osmosis_ai.auth.errors import KeyringTokenError

SERVICE = "osmosis-ai"
KEYRING_ENV = "OSMOSIS_KEYRING"
_OFF = frozenset({"0", "false", "no", "off"})


def enabled_by_environment() -> bool:
    """``False`` when ``OSMOSIS_KEYRING`` turns the keyring off (``0``, ``false``, ``no``, ``off``)."""
    return os.environ.get(KEYRING_ENV, "").strip().lower() not in _OFF


def backend() -> Any | None:
    """The keyring backend tokens go to, or ``None`` when the file must hold them."""
    if not enabled_by_environment():
        return None
    try:
        import keyring
    except ImportError:
        return None
    try:
        active = keyring.get_keyring()
        priority = float(active.priority)
    except Exception:  # a backend that cannot even describe itself is not one to trust with a token
        return None
    return active if priority > 0 else None


def entry_name(platform_url: str, workspace_key: str) -> str:
    """The keyring user name of one workspace's token: stable across logins of that workspace."""
    return f"{workspace_key}@{platform_url}"


def store_token(platform_url: str, workspace_key: str, token: str) -> bool:
    """Put ``token`` in the keyring; ``False`` when there is no usable keyring or it refused."""
    active = backend()
    if active is None:
        return False
    try:
        active.set_password(SERVICE, entry_name(platform_url, workspace_key), token)
    except Exception:
        return False
    return True


def load_token(platform_url: str, workspace_key: str, workspace_name: str) -> str:
    """The token kept in the keyring for this workspace.

    Raises :class:`KeyringTokenError` (saying how to get going again) when the keyring is turned off,
    unavailable, locked, fails, or has no such entry.
    """
    again = f"run 'osmosis login' to log in to workspace {workspace_name!r} again"
    if not enabled_by_environment():
        raise KeyringTokenError(
            f"the token of workspace {workspace_name!r} is in the OS keyring, which "
            f"{KEYRING_ENV}=0 turns off; unset it, or {again}"
        )
    active = backend()
    if active is None:
        raise KeyringTokenError(
            f"the token of workspace {workspace_name!r} is in the OS keyring, but no keyring backend "
            f"is available now (install 'osmosis-ai[keyring]' or unlock the keyring), or {again}"
        )
    try:
        token = active.get_password(SERVICE, entry_name(platform_url, workspace_key))
    except Exception as exc:
        raise KeyringTokenError(
            f"the OS keyring could not give the token of workspace {workspace_name!r} "
            f"({type(exc).__name__}; is it locked?); unlock it and retry, or {again}"
        ) from None
    if not token:
        raise KeyringTokenError(
            f"the OS keyring has no token for workspace {workspace_name!r} any more; {again}"
        )
    return str(token)


def delete_token(platform_url: str, workspace_key: str) -> bool:
    """Remove the workspace's keyring entry; ``True`` when it is gone (or was never there)."""
    active = backend()
    if active is None:
        return False
    name = entry_name(platform_url, workspace_key)
    try:
        if active.get_password(SERVICE, name) is None:
            return True
        active.delete_password(SERVICE, name)
    except Exception:
        return False
    return True
