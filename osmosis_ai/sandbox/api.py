"""``run`` and ``run_sync``: model-written code run in a sandbox, its end a typed result.

The arguments are checked here (a bad one is a :class:`~osmosis_ai.errors.SandboxSettingError`);
everything the code itself does, and a sandbox that cannot start, ends in a
:class:`~osmosis_ai.sandbox.result.SandboxResult`: ``run`` never raises for the code's behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from osmosis_ai._sync import synchronous
from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox.local import RESERVED, Job, run_local
from osmosis_ai.sandbox.machine import probe
from osmosis_ai.sandbox.result import SandboxResult

MAIN = "main.py"


async def run(
    code: str | None = None,
    *,
    files: Mapping[str, str | bytes] | None = None,
    command: str | Sequence[str] | None = None,
    tests: Sequence[str] | None = None,
    timeout: float = 10.0,
    memory_mb: int = 512,
    cpus: int = 1,
    network: bool = False,
    env: Mapping[str, str] | None = None,
    provider: str = "local",
) -> SandboxResult:
    """Run ``code`` (Python, as ``main.py``) or ``command`` in a fresh sandbox and say how it ended.

    ``files`` are written into the run's work directory first (relative paths; text as UTF-8).
    ``command`` (a string goes to ``/bin/sh -c``) runs instead of ``code``, which is then only a
    file. ``tests`` are Python snippets (``assert f(1) == 2``) run one by one after ``code``, in its
    namespace; each that raises nothing passes. ``timeout`` is wall-clock seconds; ``memory_mb`` the
    address space of each process (and the size of /tmp and of the work directory); ``cpus`` times
    ``timeout`` the CPU seconds of each process. No network unless ``network``; the environment holds
    ``PATH``, ``HOME=/tmp``, ``LANG`` and ``env`` only.

    ``provider`` is where it runs: ``"local"`` (bubblewrap on this machine), ``"e2b"``, ``"modal"``,
    or a provider registered under the entry-point group ``osmosis_ai.sandbox_providers``
    (:mod:`osmosis_ai.sandbox.remote`); a remote one that fails is ``infra_error`` too. Remote
    sandboxes are the provider's machines: ``memory_mb`` and ``cpus`` are their template's.
    """
    job = _job(code, files, command, tests, timeout, memory_mb, cpus, network, env)
    if not isinstance(provider, str) or not provider:
        raise SandboxSettingError(f"provider must be a provider's name, got {provider!r}")
    if provider == "local":
        return await run_local(job, await probe())
    from osmosis_ai.sandbox.remote import provider as remote_provider
    from osmosis_ai.sandbox.remote import run_remote

    return await run_remote(job, remote_provider(provider))


def _job(
    code: str | None,
    files: Mapping[str, str | bytes] | None,
    command: str | Sequence[str] | None,
    tests: Sequence[str] | None,
    timeout: float,
    memory_mb: int,
    cpus: int,
    network: bool,
    env: Mapping[str, str] | None,
) -> Job:
    contents = {_file_name(name): _file_data(name, data) for name, data in (files or {}).items()}
    if code is not None:
        if not isinstance(code, str):
            raise SandboxSettingError(f"code must be a string of Python, got {type(code).__name__}")
        if MAIN in contents:
            raise SandboxSettingError(
                f"code is written to {MAIN}, and files has a {MAIN} too: give one of them"
            )
        contents[MAIN] = code.encode()
    if command is None and MAIN not in contents:
        raise SandboxSettingError(f"nothing to run: give code, or files with a {MAIN}, or a command")
    argv: tuple[str, ...] | None = None
    if isinstance(command, str):
        argv = ("/bin/sh", "-c", command)
    elif command is not None:
        argv = tuple(command)
        if not argv or not all(isinstance(part, str) for part in argv):
            raise SandboxSettingError("command must be a string or a non-empty sequence of strings")
    checked_tests: tuple[str, ...] | None = None
    if tests is not None:
        if isinstance(tests, str):
            raise SandboxSettingError(
                "tests must be a sequence of snippets, not one string (split its lines)"
            )
        checked_tests = tuple(tests)
        if not checked_tests or not all(isinstance(test, str) for test in checked_tests):
            raise SandboxSettingError("tests must be a non-empty sequence of strings")
        if argv is not None:
            raise SandboxSettingError(
                "tests run after code; with a command, the command decides (drop tests)"
            )
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < math.inf):
        raise SandboxSettingError(f"timeout must be a positive number of seconds, got {timeout!r}")
    for setting, number, least in (("memory_mb", memory_mb, 16), ("cpus", cpus, 1)):
        if isinstance(number, bool) or not isinstance(number, int) or number < least:
            raise SandboxSettingError(f"{setting} must be a whole number of at least {least}, got {number!r}")
    variables = dict(env or {})
    for name, value in variables.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise SandboxSettingError(f"env names must be non-empty strings without '=', got {name!r}")
        if not isinstance(value, str) or "\0" in value:
            raise SandboxSettingError(f"env[{name!r}] must be a string without NUL bytes")
    return Job(contents, argv, checked_tests, float(timeout), memory_mb, cpus, bool(network), variables)


def _file_name(name: object) -> str:
    if not isinstance(name, str) or not name or "\0" in name:
        raise SandboxSettingError(f"file names must be non-empty strings, got {name!r}")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or str(path) in (".", ""):
        raise SandboxSettingError(
            f"file name {name!r} must be a relative path inside the work directory, without '..'"
        )
    if str(path) in RESERVED:
        raise SandboxSettingError(f"file name {name!r} is the sandbox's own; choose another")
    return str(path)


def _file_data(name: str, data: object) -> bytes:
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise SandboxSettingError(f"files[{name!r}] must be str or bytes, got {type(data).__name__}")


run_sync = synchronous(
    run, "run_sync", "The blocking twin of :func:`run`: the same arguments, the same result."
)
