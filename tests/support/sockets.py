"""Loopback sockets for the stand-ins: a listener on a free port, and a port nothing listens on."""

from __future__ import annotations

import itertools
import os
import random
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


# free_port's ports lie below the kernel's ephemeral range (32768 and up here), so no listener on
# port 0 and no outgoing connection is given one before the subprocess binds it; each xdist worker
# (up to 8) has a range of its own, gone through in turn from a random start so that one test's
# port is not the next one's, nor another test run's.
_SPAN = 1500
_FIRST = 20000 + _SPAN * (int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % 8)
_turn = itertools.count(random.randrange(_SPAN))


def free_port() -> int:
    """A port of 127.0.0.1 that is free now and that nothing else is handed out (for a subprocess to
    bind, or to be refused on)."""
    for _ in range(_SPAN):
        port = _FIRST + next(_turn) % _SPAN
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_FIRST}-{_FIRST + _SPAN - 1}")
