"""``benchmarks/trainer_driver.py`` drives ``benchmarks/minimal_server.py`` end to end, each in its own process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.sockets import free_port
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    def listening() -> bool:
        assert process.poll() is None, "the minimal server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            return False
        return True

    wait_until(listening, timeout=20, what="the minimal server listening")


def test_trainer_driver_runs_rollouts_through_the_minimal_server() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, str(BENCHMARKS / "minimal_server.py"), str(port)], env=env)
    try:
        _wait_listening(port, server)
        command = [sys.executable, str(BENCHMARKS / "trainer_driver.py"), "--target", f"http://127.0.0.1:{port}",
                   "--port", str(free_port()), "--rollouts", "20", "--concurrency", "5", "--tool-turns", "2",
                   "--timeout", "60"]  # fmt: skip
        driver = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    finally:
        server.terminate()
        server.wait(timeout=15)
    assert driver.returncode == 0, driver.stderr
    result = json.loads(driver.stdout.splitlines()[-1])
    assert result["completed"] == 20
    assert result["statuses"] == {"COMPLETED": 20}
    assert result["init_errors"] == 0
    assert result["extra_callbacks"] == 0
