"""Loopback sockets for the stand-ins: a listener on a free port, and a port nothing listens on."""

from __future__ import annotations

import socket


def listener() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1, for uvicorn or aiohttp to serve on.

    The explicit ``IPPROTO_TCP`` lets asyncio set ``TCP_NODELAY`` on the accepted connections; without
    it, an answer written in two parts waits for the client's delayed ACK.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def free_port() -> int:
    """A port of 127.0.0.1 that was free a moment ago (for a subprocess to bind, or to be refused on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
