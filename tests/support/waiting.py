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
    ``timeout`` seconds. The timeout is a generous bound on a hang, never a claim about speed.

    The polls start 5 ms apart and spread out to 50 ms: a wait of seconds (a server starting, a Ray
    actor ending) costs a fifth of the polls it would at a fixed 10 ms, each of them CPU on both sides
    (a /health answered, the processes listed, Ray's state asked), and a short one ends as soon."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.05)
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
