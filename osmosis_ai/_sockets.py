"""Listening sockets for the servers the SDK starts on a port it picks itself (and for its tests)."""

from __future__ import annotations

import socket


def bind_listener(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A TCP socket bound to ``(host, port)`` — port 0 picks a free one — ready for uvicorn or aiohttp.

    It is created with ``IPPROTO_TCP`` on purpose: asyncio enables ``TCP_NODELAY`` on accepted
    connections only when the listening socket says it is TCP, and without it every keep-alive
    response written in two parts waits for the peer's delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
