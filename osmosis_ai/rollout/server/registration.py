"""Registering a running RolloutServer with the Osmosis Platform (``osmosis serve`` without ``--local``).

Once the server answers its own ``/health``, it POSTs ``{host, port, agent_loop_name, api_key}`` to the
Platform's ``/api/cli/rollout-server/register`` through the Platform client
(:func:`osmosis_ai.auth.client.aauthenticated_request`: the right Platform, the token, a 401 flagging a
stored login); the Platform then health-checks ``/platform/health`` with the server key. Everything
here is async and cancellable, so shutdown never waits for it, and every failure is a
:class:`RegistrationResult` with a readable error, never an exception. The public IP (needed when
binding a wildcard address) is detected at most once per process.

Credentials: ``osmosis_ai.auth``'s ``WorkspaceCredentials`` (a stored login) or any object with an
``access_token`` (a bare token). :func:`load_credentials` finds them: the environment's token first,
else the login stored by ``osmosis login``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai import _http
from osmosis_ai._deadline import Deadline
from osmosis_ai._lazy import lazy_exports
from osmosis_ai._sync import synchronous

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutServerSettings

logger = logging.getLogger(__name__)

REGISTER_PATH = "/api/cli/rollout-server/register"
REGISTER_TIMEOUT_SECONDS = 15.0
PUBLIC_HOST_ENV = "OSMOSIS_PUBLIC_HOST"
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "", "[::]"})


@dataclass
class RegistrationResult:
    """What the Platform answered (or why registration failed)."""

    success: bool
    server_id: str | None = None
    status: str = "unknown"
    error: str | None = None
    server_info: dict[str, Any] | None = None

    @property
    def is_healthy(self) -> bool:
        return self.status == "healthy"


def load_credentials() -> Any | None:
    """The Platform credentials to register with, or ``None`` when there are none.

    ``OSMOSIS_TOKEN``/``OSMOSIS_ACCESS_TOKEN`` first (CI), else the current Platform's active
    workspace from ``osmosis login`` if it is neither expired nor rejected.
    """
    from osmosis_ai.auth.client import resolve_credentials

    return resolve_credentials()


# -- public IP ---------------------------------------------------------------------------------------


def get_public_ip() -> str:
    """The host's public IPv4 (detected once per process; raises ``PublicIPDetectionError``). Blocking."""
    from osmosis_ai.rollout.network import detect_public_ip

    return detect_public_ip()


async def aget_public_ip() -> str:
    """:func:`get_public_ip` from async code, on the running loop (cancellable; the loop never blocks)."""
    from osmosis_ai.rollout.network import adetect_public_ip

    return await adetect_public_ip()


def is_wildcard_host(host: str | None) -> bool:
    """``0.0.0.0``, ``::`` and the empty host listen everywhere."""
    return (host or "").strip() in WILDCARD_HOSTS


def _public_host_override() -> str | None:
    return os.environ.get(PUBLIC_HOST_ENV, "").strip() or None


def get_report_host(host: str) -> str:
    """The address to give the Platform for a server bound to ``host``.

    Wildcard binds report ``OSMOSIS_PUBLIC_HOST`` when set, else the detected public IP; any other
    host is reported unchanged.
    """
    if not is_wildcard_host(host):
        return host
    return _public_host_override() or get_public_ip()


async def _report_host(host: str) -> str:
    if is_wildcard_host(host):
        return _public_host_override() or await aget_public_ip()
    if host in ("127.0.0.1", "localhost", "::1"):
        logger.warning("registering loopback address %s: the Platform will not be able to reach it", host)
    return host


# -- registration --------------------------------------------------------------------------------------


def _parse_response(data: Any) -> RegistrationResult:
    if not isinstance(data, dict):
        return RegistrationResult(
            False, status="error", error="the Platform answered with an unexpected body"
        )
    status = str(data.get("status") or "unknown")
    server_id = data.get("id")
    health = data.get("health_check_result")
    health = health if isinstance(health, dict) else {}  # the Platform may send null
    server_id = str(server_id) if server_id is not None else None
    if status == "healthy":
        info = health.get("server_info")
        return RegistrationResult(
            True, server_id, status, server_info=info if isinstance(info, dict) else None
        )
    error = health.get("error")
    message = error if isinstance(error, str) and error else "the Platform could not health-check the server"
    return RegistrationResult(True, server_id, status, error=message)


async def aregister_with_platform(
    host: str, port: int, agent_loop_name: str, credentials: Any, api_key: str | None = None
) -> RegistrationResult:
    """POST the registration record; every failure becomes ``success=False`` with a readable error."""
    from osmosis_ai.auth.client import aauthenticated_request
    from osmosis_ai.auth.errors import AuthError

    if credentials is None:  # never "whoever is logged in": the caller chose what to register with
        return RegistrationResult(False, status="error", error="no Platform credentials to register with")
    try:
        report_host = await _report_host(host)
    except Exception as exc:
        return RegistrationResult(
            False,
            status="error",
            error=f"could not detect this host's public IP ({exc}); pass an explicit --host address",
        )
    body: dict[str, Any] = {"host": report_host, "port": port, "agent_loop_name": agent_loop_name}
    if api_key is not None:
        body["api_key"] = api_key
    try:
        data = await aauthenticated_request(
            REGISTER_PATH, credentials=credentials, method="POST", data=body, timeout=REGISTER_TIMEOUT_SECONDS
        )
    except AuthError as exc:
        return RegistrationResult(False, status="error", error=str(exc))
    return _parse_response(data)


register_with_platform = synchronous(
    aregister_with_platform,
    "register_with_platform",
    "Synchronous form of :func:`aregister_with_platform` (blocks; callable from any thread).",
)


def _probe_host(host: str) -> str:
    """Where this machine reaches a server bound to ``host``: loopback for wildcard binds, IPv6 in brackets."""
    host = host.strip()
    if is_wildcard_host(host):
        return "[::1]" if ":" in host else "127.0.0.1"
    if host == "localhost":
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def wait_until_ready(host: str, port: int, settings: RolloutServerSettings) -> bool:
    """Whether the server bound to ``host``:``port`` answered ``/health`` within the readiness timeout."""
    url = f"http://{_probe_host(host)}:{port}/health"
    deadline = Deadline.after(settings.registration_readiness_timeout_seconds)
    pool = _http.shared_pool()
    while deadline.remaining() > 0:
        try:
            if (await pool.request("GET", url, timeout=1.0)).status == 200:
                return True
        except _http.NoAnswer as exc:
            logger.debug("readiness probe %s: %s", url, exc)
        await asyncio.sleep(settings.registration_readiness_poll_interval_seconds)
    return False


def log_registration_result(result: RegistrationResult) -> None:
    """Log the outcome of a registration (what happens when nobody asked to be told)."""
    if result.success and result.is_healthy:
        logger.info("registered with the Osmosis Platform: server id %s, healthy", result.server_id)
    elif result.success:
        logger.warning("registered with the Osmosis Platform, but its health check failed: %s", result.error)
    else:
        logger.warning("registration with the Osmosis Platform failed: %s", result.error)


_EXPORTS = {"print_registration_result": "osmosis_ai.cli.commands.serve"}  # prints: it is the command's

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
