"""What one sandboxed run ended in: :class:`SandboxOutcome` and :class:`SandboxResult`."""

from __future__ import annotations

import enum
from dataclasses import dataclass

OUTPUT_LIMIT = 64 * 1024
"""Bytes of stdout and of stderr kept from one run; the rest is read and dropped (``*_truncated``)."""


class SandboxOutcome(str, enum.Enum):
    """How a run ended. Only ``infra_error`` says nothing about the code: the sandbox did not run it."""

    PASSED = "passed"
    """The code exited 0 and, when tests were given, every test passed."""
    FAILED = "failed"
    """The code exited non-zero, or a test failed or never ran."""
    TIMEOUT = "timeout"
    """The run reached its wall-clock timeout or its CPU-time limit and was killed."""
    MEMORY = "memory"
    """The code ran out of its memory (address-space) limit."""
    CRASHED = "crashed"
    """The code died of a signal (segfault, abort, ``kill -9``)."""
    INFRA_ERROR = "infra_error"
    """The sandbox itself could not start or run the code: never a verdict on the code."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SandboxResult:
    """One run. ``exit_code`` is the code's exit status (``128 + n`` for signal ``n``; ``None`` when
    it never ran or was killed at the deadline). ``stdout``/``stderr`` are decoded as UTF-8 (bad
    bytes replaced), at most :data:`OUTPUT_LIMIT` bytes each. ``duration`` is wall-clock seconds
    from start to the end of the sandbox. ``tests_passed``/``tests_total`` are ``None`` unless tests
    were given. ``error`` says why for ``infra_error`` (and names the limit for ``timeout``/``memory``).
    ``tier`` is the isolation that ran it (``"local"``: bubblewrap namespaces)."""

    outcome: SandboxOutcome
    exit_code: int | None
    stdout: str
    stderr: str
    duration: float
    tests_passed: int | None = None
    tests_total: int | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: str | None = None
    tier: str = "local"

    @property
    def passed(self) -> bool:
        return self.outcome is SandboxOutcome.PASSED

    @property
    def fraction(self) -> float | None:
        """Share of tests passed (``None`` without tests)."""
        if self.tests_total is None or self.tests_passed is None:
            return None
        return self.tests_passed / self.tests_total if self.tests_total else 0.0
