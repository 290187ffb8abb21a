"""``osmosis`` run in this process through :func:`osmosis_ai.cli.main.main`, its output captured.

The environment is the one :mod:`tests.support.cli` gives subprocesses (no Platform token, an empty
config directory, no OS keyring), set with ``monkeypatch`` for the duration of the test.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from osmosis_ai.cli.main import main
from tests.support.cli import EMPTY_CONFIG_DIR, PLATFORM_TOKEN_ENVS


@dataclass(frozen=True)
class Ran:
    status: int
    stdout: str
    stderr: str


def isolate(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Platform credentials and no OS keyring for commands run in this process."""
    for name in PLATFORM_TOKEN_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OSMOSIS_CONFIG_DIR", EMPTY_CONFIG_DIR)
    monkeypatch.setenv("OSMOSIS_KEYRING", "0")


def run_osmosis(capsys: pytest.CaptureFixture[str], *argv: str) -> Ran:
    """``osmosis *argv`` in this process: its exit status and what it printed (captured afresh)."""
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return Ran(status, captured.out, captured.err)
