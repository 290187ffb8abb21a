"""Running ``osmosis`` on a pseudo-terminal, as a person at a keyboard does (colours, progress bars, Ctrl-C)."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

from tests.support.cli import subprocess_env


class Terminal:
    """``osmosis *args`` with stdin, stdout and stderr on one pseudo-terminal; use as a context manager."""

    def __init__(self, *args: str) -> None:
        self.screen = ""
        primary, secondary = pty.openpty()
        self._primary = primary
        self.process = subprocess.Popen(
            [sys.executable, "-m", "osmosis_ai", *args],
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            env=subprocess_env(),
        )
        os.close(secondary)

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False once the program has closed the terminal."""
        ready, _, _ = select.select([self._primary], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self._primary, 65536)
        except OSError:  # the program closed its end
            return False
        self.screen += chunk.decode("utf-8", "replace")
        return bool(chunk)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            if time.monotonic() > deadline or not self._read(0.2):
                raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.screen}")

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def finish(self, timeout: float = 60) -> int:
        """Read the rest of the screen and return the exit status (the program must end on its own)."""
        deadline = time.monotonic() + timeout
        while self._read(0.2) and time.monotonic() < deadline:
            pass
        return self.process.wait(timeout=max(deadline - time.monotonic(), 1))

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self._primary)
