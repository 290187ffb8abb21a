"""Registering a running RolloutServer with the Osmosis Platform (``osmosis serve`` without ``--local``).

Once the server answers its own ``/health``, it POSTs ``{host, port, agent_loop_name, api_key}`` to
``{OSMOSIS_PLATFORM_URL}/api/cli/rollout-server/register`` with the user's Platform access token; the
Platform then health-checks ``/platform/health`` with the server key. Everything here is async and
cancellable, so shutdown never waits for it. The public IP (needed when binding a wildcard address)
is detected at most once per process. Requests go through the SDK's shared HTTP pool
(:mod:`osmosis_ai._http`).

Credentials: any object with an ``access_token`` attribute (``osmosis_ai.auth``'s
``WorkspaceCredentials``, or :class:`PlatformCredentials`). :func:`load_credentials` finds them: the
environment's token first, else the credentials stored by ``osmosis login``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai import _http
from osmosis_ai.consts import PACKAGE_VERSION

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutServerSettings
    from osmosis_ai.rollout.server.config import ServerConfig

logger = logging.getLogger(__name__)

DEFAULT_PLATFORM_URL = "https://platform.osmosis.ai"
REGISTER_PATH = "/api/cli/rollout-server/register"
REGISTER_TIMEOUT_SECONDS = 15.0
ACCESS_TOKEN_ENV = "OSMOSIS_ACCESS_TOKEN"
PUBLIC_HOST_ENV = "OSMOSIS_PUBLIC_HOST"
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "", "[::]"})


@dataclass(frozen=True)
class PlatformCredentials:
    """The minimum registration needs: a Platform access token (never printed or logged)."""

    access_token: str

    def __repr__(self) -> str:
        return "PlatformCredentials(access_token='***')"


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


def platform_url() -> str:
    """``OSMOSIS_PLATFORM_URL`` (read now, not at import time) or the public Platform.

    Raises ``PlatformURLError`` for a URL tokens must not be sent to (plain http beyond loopback).
    """
    from osmosis_ai.auth.settings import platform_url as configured

    return configured()


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
    token = getattr(credentials, "access_token", None)
    if not isinstance(token, str) or not token:
        return RegistrationResult(
            False, status="error", error="the Platform credentials carry no access token"
        )
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "User-Agent": f"osmosis-cli/{PACKAGE_VERSION}",
    }
    from osmosis_ai.auth.errors import PlatformURLError

    try:
        base_url = platform_url()
    except PlatformURLError as exc:
        return RegistrationResult(False, status="error", error=str(exc))
    issued_by = getattr(credentials, "platform_url", None)
    if issued_by is not None and issued_by != base_url:
        return RegistrationResult(
            False,
            status="error",
            error=f"the stored credentials were issued by {issued_by}, not {base_url}; run 'osmosis login'",
        )
    url = base_url + REGISTER_PATH
    try:
        response = await _http.shared_pool().request(
            "POST", url, body=json.dumps(body).encode(), headers=headers, timeout=REGISTER_TIMEOUT_SECONDS
        )
    except _http.NoAnswer as exc:
        return RegistrationResult(False, status="error", error=f"cannot reach the Platform at {url}: {exc}")
    if response.status == 401:
        await _mark_rejected(credentials)
        return RegistrationResult(
            False,
            status="error",
            error="your Platform session expired or is invalid; run 'osmosis login' again",
        )
    text = response.body.decode("utf-8", "replace")
    if not 200 <= response.status < 300:
        return RegistrationResult(
            False, status="error", error=f"the Platform answered HTTP {response.status}: {text[:200]}"
        )
    try:
        data = json.loads(text)
    except ValueError:
        return RegistrationResult(
            False, status="error", error="the Platform answered with a body that is not JSON"
        )
    return _parse_response(data)


async def _mark_rejected(credentials: Any) -> None:
    """Flag stored credentials the Platform refused, so the next command asks for a new login."""
    from osmosis_ai.auth.store import WorkspaceCredentials, mark_invalid

    if isinstance(credentials, WorkspaceCredentials):
        try:
            await asyncio.to_thread(mark_invalid, credentials)
        except Exception as exc:  # the registration outcome matters more than the flag
            logger.debug("could not flag the rejected credentials: %s", type(exc).__name__)


def register_with_platform(
    host: str, port: int, agent_loop_name: str, credentials: Any, api_key: str | None = None
) -> RegistrationResult:
    """Synchronous form of :func:`aregister_with_platform` (blocks; callable from any thread)."""
    return _http.run_sync(lambda: aregister_with_platform(host, port, agent_loop_name, credentials, api_key))


def print_registration_result(
    result: RegistrationResult, host: str, port: int, agent_loop_name: str, api_key: str | None = None
) -> None:
    """Print the console report of a registration; the report is drawn by ``osmosis serve``."""
    from osmosis_ai.cli.commands.serve import print_registration_result as render

    render(result, host, port, agent_loop_name, api_key)


def _probe_host(host: str) -> str:
    """Where this machine reaches a server bound to ``host``: loopback for wildcard binds, IPv6 in brackets."""
    host = host.strip()
    if is_wildcard_host(host):
        return "[::1]" if ":" in host else "127.0.0.1"
    if host == "localhost":
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def _wait_until_ready(host: str, port: int, settings: RolloutServerSettings) -> bool:
    url = f"http://{_probe_host(host)}:{port}/health"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.registration_readiness_timeout_seconds
    pool = _http.shared_pool()
    while loop.time() < deadline:
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


async def register_when_ready(config: ServerConfig, agent_loop_name: str) -> RegistrationResult:
    """Wait for the server's own ``/health``, register once, and hand the outcome to
    ``config.on_registration`` (default: :func:`log_registration_result`). The lifespan runs this as
    a task when ``config.registers``."""
    assert config.host is not None and config.port is not None
    if not await _wait_until_ready(config.host, config.port, config.server):
        logger.warning("the server did not answer /health in time; registering anyway")
    result = await aregister_with_platform(
        config.host, config.port, agent_loop_name, config.credentials, config.api_key
    )
    (config.on_registration or log_registration_result)(result)
    return result
