"""Address helpers and public-IP detection.

``detect_public_ip`` asks the cloud metadata services first (AWS IMDSv2, GCP, Azure, concurrently,
at most ``CLOUD_WALL_TIMEOUT`` seconds), then public echo services (concurrently, at most
``EXTERNAL_WALL_TIMEOUT`` seconds). The first valid IPv4 wins and is returned at once; the slower
requests are cancelled. A successful result is cached for the process; ``refresh=True`` detects again.

The requests go through the SDK's HTTP seam (:mod:`osmosis_ai._http`). The public functions are
synchronous (they block the calling thread, never an event loop it may run: the requests run on a
private loop in a worker thread); :func:`adetect_public_ip` is the same detection for async code.
Metadata requests never use a proxy; the echo services use the environment's proxy settings.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Coroutine
from typing import Any

from osmosis_ai import _http
from osmosis_ai._sync import run_sync
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError

logger = logging.getLogger(__name__)

METADATA_BASE_URL = "http://169.254.169.254"
CLOUD_REQUEST_TIMEOUT = 2.0
CLOUD_WALL_TIMEOUT = 2 * CLOUD_REQUEST_TIMEOUT + 2.0  # AWS needs two requests
EXTERNAL_IP_SERVICES = (
    "https://checkip.amazonaws.com",
    "https://api.ipify.org",
    "https://icanhazip.com",
    "https://ifconfig.me/ip",
)
EXTERNAL_REQUEST_TIMEOUT = 10.0
EXTERNAL_WALL_TIMEOUT = EXTERNAL_REQUEST_TIMEOUT + 1.0
_MAX_BODY = 256
_HOST_LABEL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_PORT_SUFFIX = re.compile(r":\d+$")

_cache_lock = threading.Lock()
_cached_ip: str | None = None


class PublicIPDetectionError(OsmosisRolloutError):
    """No public IPv4 address could be detected; pass an explicit host instead."""


def validate_ipv4(ip: str) -> bool:
    """Whether ``ip`` is a dotted-quad IPv4 address."""
    try:
        ipaddress.IPv4Address(ip)
    except (ipaddress.AddressValueError, ValueError, TypeError):
        return False
    return True


def is_valid_hostname_or_ip(value: str) -> bool:
    """Whether ``value`` (optionally with ``:port``) is an IPv4 address or a DNS host name (no IPv6)."""
    if not isinstance(value, str) or not value or len(value) > 260:
        return False
    host = _PORT_SUFFIX.sub("", value)
    if validate_ipv4(host):
        return True
    if not host or len(host) > 253:
        return False
    return all(_HOST_LABEL.match(label) for label in host.split("."))


def is_private_ip(ip: str) -> bool:
    """Whether ``ip`` (IPv4 or IPv6) is private, loopback, link-local...; invalid input -> ``False``."""
    try:
        return ipaddress.ip_address(ip).is_private
    except (ValueError, TypeError):
        return False


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``..., honouring ``NO_PROXY``)."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


async def _fetch(
    url: str, headers: dict[str, str], timeout: float, *, method: str = "GET", use_env_proxy: bool = False
) -> str | None:
    """The stripped body of a 2xx answer from ``url``, or ``None`` on any failure (404: "no public IP")."""
    try:
        response = await _http.shared_pool().request(
            method,
            url,
            headers=headers,
            timeout=timeout,
            follow_redirects=True,
            proxy=_env_proxy(url) if use_env_proxy else None,
        )
    except _http.NoAnswer as exc:
        logger.debug("IP probe %s failed: %s", url, exc)
        return None
    if not 200 <= response.status < 300:
        if response.status != 404:
            logger.debug("IP probe %s answered %d", url, response.status)
        return None
    return response.body[:_MAX_BODY].decode("ascii", "replace").strip()


async def _aws() -> str | None:
    token = await _fetch(
        f"{METADATA_BASE_URL}/latest/api/token",
        {"X-aws-ec2-metadata-token-ttl-seconds": "60"},
        CLOUD_REQUEST_TIMEOUT,
        method="PUT",
    )
    if not token:
        return None
    return await _fetch(
        f"{METADATA_BASE_URL}/latest/meta-data/public-ipv4",
        {"X-aws-ec2-metadata-token": token},
        CLOUD_REQUEST_TIMEOUT,
    )


async def _gcp() -> str | None:
    return await _fetch(
        f"{METADATA_BASE_URL}/computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip",
        {"Metadata-Flavor": "Google"},
        CLOUD_REQUEST_TIMEOUT,
    )


async def _azure() -> str | None:
    return await _fetch(
        f"{METADATA_BASE_URL}/metadata/instance/network/interface/0/ipv4/ipAddress/0/publicIpAddress"
        "?api-version=2021-02-01&format=text",
        {"Metadata": "true"},
        CLOUD_REQUEST_TIMEOUT,
    )


async def _first_ipv4(probes: list[Coroutine[Any, Any, str | None]], wall_timeout: float) -> str | None:
    """Run ``probes`` concurrently; the first valid IPv4 within ``wall_timeout`` seconds, others cancelled."""
    tasks = [asyncio.ensure_future(probe) for probe in probes]
    try:
        for next_done in asyncio.as_completed(tasks, timeout=wall_timeout):
            try:
                candidate = await next_done
            except asyncio.TimeoutError:  # the wall: every probe still running is too late
                return None
            except Exception as exc:  # a probe must never take the others down
                logger.debug("IP probe failed: %s", exc)
                continue
            if candidate and validate_ipv4(candidate):
                return candidate
        return None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _adetect_from_cloud_metadata() -> str | None:
    return await _first_ipv4([_aws(), _gcp(), _azure()], CLOUD_WALL_TIMEOUT)


async def _adetect_from_external_services() -> str | None:
    headers = {"User-Agent": "osmosis-ai"}
    probes = [
        _fetch(url, headers, EXTERNAL_REQUEST_TIMEOUT, use_env_proxy=True) for url in EXTERNAL_IP_SERVICES
    ]
    return await _first_ipv4(probes, EXTERNAL_WALL_TIMEOUT)


def detect_from_cloud_metadata() -> str | None:
    """The public IPv4 reported by AWS, GCP or Azure instance metadata, if any."""
    return run_sync(_adetect_from_cloud_metadata())


def detect_from_external_services() -> str | None:
    """The public IPv4 seen by public echo services, if any answers."""
    return run_sync(_adetect_from_external_services())


def detect_public_ip(*, refresh: bool = False) -> str:
    """This host's public IPv4 (cached after the first success). Blocking: keep it off the event loop.

    Raises ``PublicIPDetectionError`` when every source fails.
    """
    with _cache_lock:
        if _cached_ip is not None and not refresh:
            return _cached_ip
    return run_sync(adetect_public_ip(refresh=True))


async def adetect_public_ip(*, refresh: bool = False) -> str:
    """:func:`detect_public_ip` for async code: the requests run on the caller's event loop."""
    global _cached_ip
    with _cache_lock:
        if _cached_ip is not None and not refresh:
            return _cached_ip
    ip = await _adetect_from_cloud_metadata() or await _adetect_from_external_services()
    if ip is None:
        raise PublicIPDetectionError(
            "Could not detect this machine's public IP address.\n"
            "Tried the AWS, GCP and Azure instance metadata services and public IP echo services.\n"
            "Pass the address TrainGate should use explicitly (e.g. --host <public ip or host name>)."
        )
    with _cache_lock:
        _cached_ip = ip
    return ip
