"""Address helpers and public-IP detection (synchronous; call detection from a worker thread).

``detect_public_ip`` asks the cloud metadata services first (AWS IMDSv2, GCP, Azure, in parallel,
at most ``CLOUD_WALL_TIMEOUT`` seconds), then public echo services (in parallel, at most
``EXTERNAL_WALL_TIMEOUT`` seconds). The first valid IPv4 wins and is returned at once: probes run in
daemon threads that finish on their own per-request timeouts, so neither the caller nor interpreter
exit waits for the slow ones (0.2 waited for every worker). A successful result is cached for the
process; ``refresh=True`` detects again.
"""

from __future__ import annotations

import ipaddress
import logging
import queue
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

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

_no_proxy_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
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


def _fetch(
    url: str,
    headers: dict[str, str],
    timeout: float,
    *,
    method: str = "GET",
    opener: urllib.request.OpenerDirector | None = None,
) -> str | None:
    """The stripped body of ``url``, or ``None`` on any failure (404 means "no public IP here")."""
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        with (opener or _no_proxy_opener).open(request, timeout=timeout) as response:
            return response.read(_MAX_BODY).decode("ascii", "replace").strip()
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            logger.debug("IP probe %s answered %d", url, exc.code)
        return None
    except (OSError, ValueError) as exc:
        logger.debug("IP probe %s failed: %s", url, exc)
        return None


def _aws() -> str | None:
    token = _fetch(
        f"{METADATA_BASE_URL}/latest/api/token",
        {"X-aws-ec2-metadata-token-ttl-seconds": "60"},
        CLOUD_REQUEST_TIMEOUT,
        method="PUT",
    )
    if not token:
        return None
    return _fetch(
        f"{METADATA_BASE_URL}/latest/meta-data/public-ipv4",
        {"X-aws-ec2-metadata-token": token},
        CLOUD_REQUEST_TIMEOUT,
    )


def _gcp() -> str | None:
    return _fetch(
        f"{METADATA_BASE_URL}/computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip",
        {"Metadata-Flavor": "Google"},
        CLOUD_REQUEST_TIMEOUT,
    )


def _azure() -> str | None:
    return _fetch(
        f"{METADATA_BASE_URL}/metadata/instance/network/interface/0/ipv4/ipAddress/0/publicIpAddress"
        "?api-version=2021-02-01&format=text",
        {"Metadata": "true"},
        CLOUD_REQUEST_TIMEOUT,
    )


def _first_ipv4(probes: list[Callable[[], str | None]], wall_timeout: float) -> str | None:
    """Run ``probes`` in daemon threads; return the first valid IPv4 within ``wall_timeout`` seconds."""
    results: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def run(probe: Callable[[], str | None]) -> None:
        try:
            results.put(probe())
        except Exception as exc:  # a probe must never take the others down
            logger.debug("IP probe failed: %s", exc)
            results.put(None)

    for probe in probes:
        threading.Thread(target=run, args=(probe,), name="osmosis-ip-probe", daemon=True).start()
    deadline = time.monotonic() + wall_timeout
    for _ in probes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            candidate = results.get(timeout=remaining)
        except queue.Empty:
            break
        if candidate and validate_ipv4(candidate):
            return candidate
    return None


def detect_from_cloud_metadata() -> str | None:
    """The public IPv4 reported by AWS, GCP or Azure instance metadata, if any."""
    return _first_ipv4([_aws, _gcp, _azure], CLOUD_WALL_TIMEOUT)


def detect_from_external_services() -> str | None:
    """The public IPv4 seen by public echo services, if any answers."""
    opener = urllib.request.build_opener()

    def probe(url: str) -> Callable[[], str | None]:
        return lambda: _fetch(url, {"User-Agent": "osmosis-ai"}, EXTERNAL_REQUEST_TIMEOUT, opener=opener)

    probes = [probe(url) for url in EXTERNAL_IP_SERVICES]
    return _first_ipv4(probes, EXTERNAL_WALL_TIMEOUT)


def detect_public_ip(*, refresh: bool = False) -> str:
    """This host's public IPv4 (cached after the first success). Blocking: keep it off the event loop.

    Raises ``PublicIPDetectionError`` when every source fails.
    """
    global _cached_ip
    with _cache_lock:
        if _cached_ip is not None and not refresh:
            return _cached_ip
    ip = detect_from_cloud_metadata() or detect_from_external_services()
    if ip is None:
        raise PublicIPDetectionError(
            "Could not detect this machine's public IP address.\n"
            "Tried the AWS, GCP and Azure instance metadata services and public IP echo services.\n"
            "Pass the address TrainGate should use explicitly (e.g. --host <public ip or host name>)."
        )
    with _cache_lock:
        _cached_ip = ip
    return ip
