"""``osmosis serve`` as a subprocess on a free loopback port: started, waited for, stopped with SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from tests.support.cli import REPO, subprocess_env
from tests.support.sockets import free_port
from tests.support.waiting import probe, wait_until


class ServeProcess:
    """``osmosis serve -p PORT *args`` in ``cwd``; ``env`` adds to the environment :func:`subprocess_env` gives."""

    def __init__(self, *args: str, cwd: Path = REPO, port: int | None = None, **env: str) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env.setdefault("XDG_STATE_HOME", tempfile.mkdtemp(prefix="osmosis-serve-state-"))  # default outbox
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "osmosis_ai", "serve", "-p", str(self.port), *args],
            cwd=cwd,
            env=subprocess_env(COLUMNS="200", **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self, timeout: float = 20) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited early: {self.proc.communicate()}")
            try:
                return probe().get(f"{self.url}/health", timeout=0.5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout, what="serve ready")

    def stop(self) -> tuple[int, str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            out, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, out, err
