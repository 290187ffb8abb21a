"""Where the Platform is and where credentials live, read from the environment when asked.

Nothing is resolved at import time, so ``OSMOSIS_PLATFORM_URL`` set by a ``.env`` file that the CLI
loads after importing this module still counts. Bearer tokens travel only over HTTPS, except to a
loopback host (a local stand-in or a tunnel), where plain HTTP cannot leave the machine.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from osmosis_ai.auth.errors import PlatformURLError

DEFAULT_PLATFORM_URL = "https://platform.osmosis.ai"
PLATFORM_URL_ENV = "OSMOSIS_PLATFORM_URL"
CONFIG_DIR_ENV = "OSMOSIS_CONFIG_DIR"
TOKEN_ENVS = ("OSMOSIS_TOKEN", "OSMOSIS_ACCESS_TOKEN")
CALLBACK_PORTS = range(8976, 8986)
DEFAULT_TOKEN_EXPIRY_DAYS = 90
CREDENTIALS_FILENAME = "credentials.json"


def is_loopback_host(host: str) -> bool:
    """``localhost`` itself or a loopback IP address (v4 or v6). A name *under* ``localhost``
    (``evil.localhost``) is not one: nothing guarantees the resolver keeps it on this machine."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_platform_url(url: str) -> str:
    """``url`` as the key credentials are scoped by: lower-case scheme and host, no trailing slash.

    Raises :class:`PlatformURLError` for anything but ``https://``, or ``http://`` to loopback.
    """
    raw = url.strip()
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        raise PlatformURLError(f"the Platform URL {raw!r} is not an http(s) URL")
    if scheme == "http" and not is_loopback_host(host):
        raise PlatformURLError(
            f"refusing the Platform URL {raw!r}: tokens are sent only over https "
            "(plain http is accepted for loopback addresses only)"
        )
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def platform_url() -> str:
    """The Platform to talk to: ``OSMOSIS_PLATFORM_URL`` or the public one, validated."""
    return normalize_platform_url(os.environ.get(PLATFORM_URL_ENV) or DEFAULT_PLATFORM_URL)


def config_dir() -> Path:
    """``OSMOSIS_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/osmosis``, else ``~/.config/osmosis``."""
    explicit = os.environ.get(CONFIG_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "osmosis"


def credentials_file() -> Path:
    """The credentials store inside :func:`config_dir`."""
    return config_dir() / CREDENTIALS_FILENAME


def env_token() -> str | None:
    """A token from ``OSMOSIS_TOKEN`` or ``OSMOSIS_ACCESS_TOKEN`` (for CI), if set."""
    for name in TOKEN_ENVS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def device_name() -> str:
    """How this machine is named to the Platform: ``OSMOSIS_DEVICE_NAME``, else the host name."""
    import socket

    explicit = os.environ.get("OSMOSIS_DEVICE_NAME", "").strip()
    if explicit:
        return explicit
    try:
        return socket.gethostname() or "Unknown"
    except OSError:
        return "Unknown"
