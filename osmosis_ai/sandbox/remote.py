"""Remote tiers: a run in a provider's sandbox behind the same ``run``, and how a provider is found.

A provider is a :class:`RemoteProvider`: five calls on the provider's own sandboxes (create with a
time to live, upload a file, exec a command, download a file, delete). :func:`run_remote` drives
one run through them: the run's files, the harness and its input are uploaded, the harness (or the
command) is executed under the run's timeout, its report downloaded and read as the local tier reads
it, and the sandbox deleted, whatever happened.

* **Time to live**: by default the sum of the run's deadlines (create, upload, the run's timeout,
  download, delete), so a sandbox this process can no longer delete (it was killed) stops billing
  by itself soon after.
* **Never billed twice**: each run has an idempotency key, given to the provider with the sandbox
  it creates. A create that got no answer, or a retryable one, is retried only after asking the
  provider for a sandbox already made under that key (:meth:`RemoteProvider.find`): that one is used.
* **Failures are typed**: anything the provider does wrong (refused, unreachable, out of retries,
  an answer that makes no sense) ends the run ``infra_error`` with the provider's name and why;
  never a verdict on the code.

Providers by name (:func:`provider`): ``local`` (the bubblewrap tier), ``e2b``
(:mod:`osmosis_ai.sandbox.e2b`), ``modal`` (:mod:`osmosis_ai.sandbox.modal`) and any third-party one registered under the entry-point group
``osmosis_ai.sandbox_providers`` (a class or factory called without arguments, returning a
:class:`RemoteProvider`). docs/design/sandbox.md says what each remote tier isolates.
"""

from __future__ import annotations

import contextlib
import marshal
import secrets
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from osmosis_ai._http import RetryPolicy, retrying
from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox.local import HARNESS, INPUT, Job, classify, harness_source, test_counts
from osmosis_ai.sandbox.result import OUTPUT_LIMIT, SandboxOutcome, SandboxResult

ENTRY_POINT_GROUP = "osmosis_ai.sandbox_providers"
WORKDIR = "/tmp/osmosis-sandbox"
REPORT = ".osmosis-report"
CREATE_DEADLINE = 60.0
TRANSFER_DEADLINE = 30.0
"""Seconds for each upload and download, and for the delete."""
RETRIES = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=4.0)


class ProviderFailure(Exception):
    """A provider call failed. ``retryable``: asking again may succeed (no answer, 429, 5xx)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Executed:
    """How a remote command ended: its exit status (``None`` if it was still running at the timeout),
    its output, and whether the timeout stopped the wait."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool


@runtime_checkable
class RemoteProvider(Protocol):
    """One provider's sandboxes. Every call raises :class:`ProviderFailure` when it cannot be done."""

    name: str

    async def create(self, *, key: str, ttl: float, network: bool, timeout: float) -> str:
        """A new sandbox living ``ttl`` seconds, tagged with the idempotency ``key``; its id."""
        ...

    async def find(self, key: str, *, timeout: float) -> str | None:
        """The id of a sandbox already created with ``key``, if there is one."""
        ...

    async def upload(self, sandbox: str, path: str, data: bytes, *, timeout: float) -> None:
        """Write ``data`` to the absolute ``path`` in ``sandbox`` (parent directories made)."""
        ...

    async def execute(
        self, sandbox: str, argv: Sequence[str], env: Mapping[str, str], *, timeout: float
    ) -> Executed:
        """Run ``argv`` in ``sandbox`` and wait for it, at most ``timeout`` seconds."""
        ...

    async def download(self, sandbox: str, path: str, *, timeout: float) -> bytes | None:
        """The file at ``path`` in ``sandbox``, or ``None`` when there is none."""
        ...

    async def delete(self, sandbox: str, *, timeout: float) -> None:
        """End ``sandbox`` (one already gone is no failure)."""
        ...


def said(data: bytes) -> str:
    """The start of what a provider or a script in its sandbox said, for an error message."""
    return data[:300].decode("utf-8", errors="replace").strip()


def ttl_for(job: Job, files: int) -> float:
    """The sum of the run's deadlines: create, each upload, the run, the download, the delete."""
    return CREATE_DEADLINE + TRANSFER_DEADLINE * (files + 2) + job.timeout


def _retryable(exc: Exception) -> bool:
    return isinstance(exc, ProviderFailure) and exc.retryable


async def _create(remote: RemoteProvider, key: str, ttl: float, network: bool) -> str:
    asked = False

    async def attempt() -> str:
        nonlocal asked
        if asked:  # an earlier create may have made one whose answer was lost: never a second
            found = await remote.find(key, timeout=TRANSFER_DEADLINE)
            if found is not None:
                return found
        asked = True
        return await remote.create(key=key, ttl=ttl, network=network, timeout=CREATE_DEADLINE)

    return await retrying(attempt, RETRIES, retryable=_retryable)


def _argv(job: Job) -> list[str]:
    if job.command is None:
        script = f"cd {WORKDIR} && exec python3 -I {HARNESS} 3 3>{REPORT}"
        return ["/bin/sh", "-c", script]
    return ["/bin/sh", "-c", f"cd {WORKDIR} && exec {shlex.join(job.command)}"]


async def run_remote(job: Job, remote: RemoteProvider) -> SandboxResult:
    """Run ``job`` in a fresh sandbox of ``remote`` (see the module docstring)."""
    started = time.monotonic()
    nonce = secrets.token_hex(16)
    contents = dict(job.files)
    if job.command is None:
        contents[HARNESS] = harness_source()
        contents[INPUT] = marshal.dumps((nonce, job.tests), 4)  # the provider's Python reads version 4
    key = f"osmosis-{secrets.token_hex(12)}"
    sandbox: str | None = None
    try:
        made = sandbox = await _create(remote, key, ttl_for(job, len(contents)), job.network)
        for name, data in contents.items():
            path = f"{WORKDIR}/{name}"

            async def upload(path: str = path, data: bytes = data) -> None:
                await remote.upload(made, path, data, timeout=TRANSFER_DEADLINE)

            await retrying(upload, RETRIES, retryable=_retryable)
        ran = await remote.execute(made, _argv(job), dict(job.env), timeout=job.timeout)

        async def download() -> bytes | None:
            return await remote.download(made, f"{WORKDIR}/{REPORT}", timeout=TRANSFER_DEADLINE)

        report: bytes | None = None
        if job.command is None and not ran.timed_out:
            report = await retrying(download, RETRIES, retryable=_retryable)
    except ProviderFailure as exc:
        return _infra(remote.name, str(exc), started)
    finally:
        if sandbox is not None:
            with contextlib.suppress(ProviderFailure):  # its time to live ends it: billed no longer
                await remote.delete(sandbox, timeout=TRANSFER_DEADLINE)
    prefix = f"{nonce} "
    text = (report or b"").decode("ascii", errors="replace")
    lines = [line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)]
    if job.command is None and "started" not in lines and not ran.timed_out:
        return _infra(remote.name, f"the harness did not start (exit status {ran.exit_code})", started, ran)
    outcome, error, code = classify(job, ran.exit_code, ran.timed_out, lines, ran.stderr)
    passed, total = test_counts(job, outcome, lines)
    return SandboxResult(
        outcome=outcome,
        exit_code=code,
        stdout=ran.stdout[:OUTPUT_LIMIT].decode("utf-8", errors="replace"),
        stderr=ran.stderr[:OUTPUT_LIMIT].decode("utf-8", errors="replace"),
        duration=time.monotonic() - started,
        tests_passed=passed,
        tests_total=total,
        stdout_truncated=len(ran.stdout) > OUTPUT_LIMIT,
        stderr_truncated=len(ran.stderr) > OUTPUT_LIMIT,
        error=error,
        tier=remote.name,
    )


def _infra(name: str, why: str, started: float, ran: Executed | None = None) -> SandboxResult:
    return SandboxResult(
        SandboxOutcome.INFRA_ERROR,
        None,
        "" if ran is None else ran.stdout[:OUTPUT_LIMIT].decode("utf-8", errors="replace"),
        "" if ran is None else ran.stderr[:OUTPUT_LIMIT].decode("utf-8", errors="replace"),
        time.monotonic() - started,
        error=f"the {name} sandbox failed: {why}",
        tier=name,
    )


def _builtin(name: str) -> Callable[[], RemoteProvider] | None:
    if name == "e2b":
        from osmosis_ai.sandbox.e2b import E2BProvider

        return E2BProvider
    if name == "modal":
        from osmosis_ai.sandbox.modal import ModalProvider

        return ModalProvider
    return None


def provider(name: str) -> RemoteProvider:
    """The remote provider called ``name``: built in (``e2b``, ``modal``), else the entry point of that name in
    :data:`ENTRY_POINT_GROUP`. An unknown name, or a factory that fails, is a
    :class:`~osmosis_ai.errors.SandboxSettingError`."""
    factory = _builtin(name)
    if factory is None:
        from importlib.metadata import entry_points

        found = [point for point in entry_points(group=ENTRY_POINT_GROUP) if point.name == name]
        if not found:
            known = sorted(
                {"local", "e2b", "modal", *(point.name for point in entry_points(group=ENTRY_POINT_GROUP))}
            )
            raise SandboxSettingError(
                f"no sandbox provider {name!r}: choose one of {', '.join(known)}, or install the package "
                f"registering it under the entry-point group {ENTRY_POINT_GROUP!r}"
            )
        try:
            factory = found[0].load()
        except Exception as exc:
            raise SandboxSettingError(f"the sandbox provider {name!r} cannot be loaded: {exc}") from exc
    try:
        made = factory()
    except SandboxSettingError:
        raise
    except Exception as exc:
        raise SandboxSettingError(f"the sandbox provider {name!r} cannot be made: {exc}") from exc
    if not isinstance(made, RemoteProvider):
        raise SandboxSettingError(
            f"the sandbox provider {name!r} made a {type(made).__name__}, not a RemoteProvider "
            "(create, find, upload, execute, download, delete and a name)"
        )
    return made
