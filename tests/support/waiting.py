"""Waiting for something a server does in another thread or process."""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; ``AssertionError`` after
    ``timeout`` seconds. The timeout is a generous bound on a hang, never a claim about speed."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.01)
    return value


@functools.cache
def probe() -> httpx.Client:
    """The client for polling a server (``probe().get(url)`` where a test would call ``httpx.get``):
    ``httpx.get`` builds a client, and loads a TLS context, on every call (~20 CPU-ms a poll). No
    connection is kept between requests, so each one meets the server as it is now, as ``httpx.get``'s."""
    return httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), verify=tls())


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx's default TLS context, loaded once: a client given it (``verify=tls()``) is made in ~0.1
    CPU-ms instead of ~20."""
    return httpx.create_ssl_context()
