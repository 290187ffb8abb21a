"""A real ``redis-server`` (Debian's package) on a free loopback port, for the shared-state tests.

One server per test session (fixture ``redis_server`` in ``tests/conftest.py``), in a private
directory with an append-only file, so :meth:`RedisServer.stop` then :meth:`RedisServer.start`
is a Redis restart that keeps its data, as a deployment's would. Tests skip, saying why, where
the program is missing (``make programs`` installs it).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.sockets import free_port
from tests.support.waiting import wait_until


def require_redis_server() -> str:
    """The ``redis-server`` executable, or skip the test saying why."""
    found = shutil.which("redis-server")
    if found is None:
        pytest.skip("no redis-server on PATH; 'make programs' installs Debian's redis-server")
    return found


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """``redis-server`` on ``127.0.0.1:<port>``; ``url`` is ``redis://127.0.0.1:<port>/0``."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = Path(tempfile.mkdtemp(prefix="osmosis-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_until(lambda: _answers(self.port), timeout=10, what="redis-server answering")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
