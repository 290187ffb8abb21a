"""A 0.3 ``main.py`` (``project/main.py``) served as a subprocess on loopback, under this package or
upstream 0.3.8's virtualenv, for the interop tests (the fixtures are in ``conftest.py``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx

from tests.support.sockets import free_port
from tests.support.waiting import probe, wait_until

MAIN = Path(__file__).resolve().parent / "project" / "main.py"
KEY = "interop-key-0123456789"


def sums_dataset(tmp_path: Path, rows: int) -> Path:
    """``rows`` questions ``what is i + 2?``: even rows' ground truth is the sum (the project's grader
    rewards 1), odd rows' is not (0)."""
    data = tmp_path / "sums.jsonl"
    data.write_text("".join(
        json.dumps({"system_prompt": "Answer with the number only.", "user_prompt": f"what is {i} + 2?",
                    "ground_truth": str(i + 2 if i % 2 == 0 else i + 3)}) + "\n"
        for i in range(rows)
    ))  # fmt: skip
    return data


def without_this_repo() -> dict[str, str]:
    """The environment for upstream's processes: nothing on PYTHONPATH, so ``osmosis_ai`` is upstream's."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


class Served:
    """``main.py`` run by ``python`` as a server on a free port until ``stop()``."""

    def __init__(self, python: Path | str, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**env, "_OSMOSIS_ROLLOUT_PORT": str(self.port), "ROLLOUT_SERVER_KEY": KEY}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(python), str(MAIN)], cwd=MAIN.parent, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        wait_until(self._up, 60, f"{MAIN} serving on {self.url}")

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"main.py exited {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
        try:
            return (
                probe().get(f"{self.url}/health", headers={"Authorization": f"Bearer {KEY}"}).status_code
                == 200
            )
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
