"""The local tier: one bubblewrap sandbox per run, started and ended by the caller (no daemon).

Each run gets fresh user, PID, mount, IPC, UTS and (unless ``network``) network namespaces; read-only
binds of /usr, the /bin and /lib links and the interpreter's prefix; tmpfs /tmp and a tmpfs work
directory holding the run's files (each capped at ``memory_mb``); a clean environment; and, set by
``prlimit`` in the sandbox before the code is executed, limits on CPU seconds, address space,
processes, file size and open files. bwrap runs with ``--die-with-parent`` under coreutils ``timeout``
in a session of its own: at the deadline the session's process group is killed, the namespace's PID 1
dies with bwrap, and the kernel kills every process of the namespace. When this process is killed
itself, ``timeout`` (which outlives it, so bwrap is never cut off mid-start) does the same at the
deadline plus :data:`BACKSTOP_GRACE`. Why each piece, and what it does not stop: docs/design/sandbox.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import math
import os
import secrets
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from osmosis_ai.sandbox.machine import Machine, drop_privileges, namespaces, usr_links
from osmosis_ai.sandbox.result import OUTPUT_LIMIT, SandboxOutcome, SandboxResult

WORKDIR = "/sandbox"
HARNESS = ".osmosis-harness.py"
INPUT = ".osmosis-input.json"  # the harness's own name for it (harness.INPUT)
RESERVED = frozenset({HARNESS, INPUT})
NPROC = 64
NOFILE = 256
KILL_GRACE = 5.0
"""Seconds to wait for the sandbox's pipes to close once it was killed (they close at once)."""
BACKSTOP_GRACE = 2.0
"""Seconds past the run's timeout at which ``timeout`` ends the run by itself, when the caller could
not because it is gone: the one bwrap runs under, and the one that is the sandbox's PID 1."""

MiB = 1024 * 1024
NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates")


@dataclass(frozen=True)
class Job:
    """One checked run: ``command`` ``None`` means the harness runs ``main.py`` (and ``tests``)."""

    files: Mapping[str, bytes]
    command: tuple[str, ...] | None
    tests: tuple[str, ...] | None
    timeout: float
    memory_mb: int
    cpus: int
    network: bool
    env: Mapping[str, str]


def _environment(job: Job, machine: Machine) -> dict[str, str]:
    path = "/usr/local/bin:/usr/bin:/bin"
    if machine.python_prefix is not None:
        path = f"{machine.python_prefix}/bin:{path}"
    return {"PATH": path, "HOME": "/tmp", "LANG": "C.UTF-8", **job.env}


def _argv(
    job: Job, machine: Machine, files: dict[str, int], report: int | None, filter_fd: int | None, idle: float
) -> list[str]:
    assert machine.bwrap is not None and machine.prlimit is not None and machine.timeout is not None
    size = str(job.memory_mb * MiB)
    backstop = f"{idle + job.timeout + BACKSTOP_GRACE:.3f}"
    argv = [machine.timeout, "--signal=KILL", backstop,
            machine.bwrap, *namespaces(network=job.network), "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", *usr_links()]  # fmt: skip
    prefix = machine.python_prefix
    if prefix is not None and not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    if job.network:
        for path in NETWORK_FILES:
            argv += ["--ro-bind-try", path, path]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--size",
        size,
        "--tmpfs",
        WORKDIR,
    ]
    made: set[PurePosixPath] = set()
    for name, fd in files.items():
        for parent in reversed(PurePosixPath(name).parents[:-1]):
            if parent not in made:
                made.add(parent)
                argv += ["--dir", f"{WORKDIR}/{parent}"]
        argv += ["--file", str(fd), f"{WORKDIR}/{name}"]
    argv += ["--remount-ro", "/", "--chdir", WORKDIR, "--clearenv", "--as-pid-1"]
    if filter_fd is not None:
        argv += ["--seccomp", str(filter_fd)]
    for name, value in _environment(job, machine).items():
        argv += ["--setenv", name, value]
    cpu = max(1, math.ceil(job.timeout * job.cpus))
    argv += [machine.timeout, "--signal=KILL", backstop,
             machine.prlimit, f"--cpu={cpu}:{cpu + 1}", f"--as={job.memory_mb * MiB}", f"--nproc={NPROC}",
             f"--fsize={job.memory_mb * MiB}", f"--nofile={NOFILE}", "--"]  # fmt: skip
    if job.command is not None:
        return [*argv, *job.command]
    assert machine.python is not None
    harness = [machine.python, "-I", HARNESS, str(report)]
    return [*argv, *harness] if not idle else [*argv, *harness, "stdin"]


async def _capped(stream: asyncio.StreamReader | None) -> tuple[bytes, bool]:
    kept, truncated = bytearray(), False
    while stream is not None and (chunk := await stream.read(65536)):
        room = OUTPUT_LIMIT - len(kept)
        truncated = truncated or len(chunk) > room
        kept += chunk[: max(room, 0)]
    return bytes(kept), truncated


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def harness_source() -> bytes:
    """The harness program's source, copied into each sandbox."""
    return (Path(__file__).parent / "harness.py").read_bytes()


async def run_local(job: Job, machine: Machine) -> SandboxResult:
    """Run ``job`` in a fresh sandbox on ``machine`` (whose ``tier`` is ``"local"``)."""
    started = time.monotonic()
    if machine.tier is None:
        return _infra(machine.refusal or "no sandbox tier", started)
    if job.command is None and machine.python is None:
        return _infra(f"no Python interpreter for the sandbox: {machine.python_note}", started)
    nonce = secrets.token_hex(16)
    contents = dict(job.files)
    if job.command is None:
        contents[HARNESS] = harness_source()
        contents[INPUT] = marshal.dumps((nonce, job.tests), 4)  # version 4: read by every Python 3 since 3.4
    try:
        sandbox = await _spawn(job, machine, contents, idle=0.0)
    except OSError as exc:
        return _infra(f"bwrap could not be started: {exc}", started)
    try:
        return await _supervise(sandbox.process, job, sandbox.report, nonce, started)
    finally:
        sandbox.close()


@dataclass
class Started:
    """A sandbox's bwrap and the descriptors made for it (closed by :meth:`close`)."""

    process: asyncio.subprocess.Process
    report: int | None
    owned: list[int]
    at: float

    def close(self) -> None:
        for fd in self.owned:
            os.close(fd)
        self.owned.clear()


async def _spawn(job: Job, machine: Machine, contents: Mapping[str, bytes], idle: float) -> Started:
    """bwrap started for ``job`` with ``contents`` in its work directory; ``idle`` seconds more before
    its backstop for a sandbox started ahead of its run, whose harness then reads the run on stdin."""
    owned: list[int] = []

    def memfd(name: str, data: bytes = b"") -> int:
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        owned.append(fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    try:
        files = {name: memfd("osmosis-sandbox-file", data) for name, data in contents.items()}
        report = memfd("osmosis-sandbox-report") if job.command is None else None
        filter_fd = (
            None
            if machine.seccomp_filter is None
            else memfd("osmosis-sandbox-seccomp", machine.seccomp_filter)
        )
        stdin = asyncio.subprocess.PIPE if idle else asyncio.subprocess.DEVNULL
        process = await asyncio.create_subprocess_exec(
            *_argv(job, machine, files, report, filter_fd, idle), stdin=stdin,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, pass_fds=owned,
            env={"PATH": "/usr/bin:/bin"}, start_new_session=True, **drop_privileges(machine.run_as),
        )  # fmt: skip
    except BaseException:
        for fd in owned:
            os.close(fd)
        raise
    return Started(process, report, owned, time.monotonic())


async def start_warm(job: Job, machine: Machine, lifetime: float) -> Started:
    """A sandbox for runs like ``job`` (its limits, network and environment; a run of code), started
    ahead: its harness waits for the run on stdin (:func:`run_warm`), for at most ``lifetime``
    seconds before the run's own timeout starts. Raises ``OSError`` when bwrap cannot start."""
    return await _spawn(job, machine, {HARNESS: harness_source()}, idle=lifetime)


async def run_warm(sandbox: Started, job: Job) -> SandboxResult | None:
    """Run ``job`` (a run of code with the limits ``sandbox`` was started with) in ``sandbox``;
    ``None``, with the sandbox ended, when it could not take the run (the code never started)."""
    started = time.monotonic()
    nonce = secrets.token_hex(16)
    process = sandbox.process
    assert process.stdin is not None
    try:
        try:
            sizes = [(name, len(data)) for name, data in job.files.items()]
            process.stdin.write(marshal.dumps((nonce, job.tests, sizes), 4))  # then the files, as they are
            process.stdin.writelines(job.files.values())
            await process.stdin.drain()
            process.stdin.close()
        except ConnectionError:  # it ended while waiting: another sandbox takes the run
            _kill(process)
            await process.wait()
            return None
        except BaseException:
            # Stopped while the run was being sent: the pipe would go on sending it in the background
            # and the harness start the code with nobody supervising it. Cut short, the run cannot be
            # read; and a harness that already has all of it is reading, so past bwrap's set-up, where
            # a kill ends the whole sandbox.
            process.stdin.transport.abort()
            _kill(process)
            raise
        return await _supervise(process, job, sandbox.report, nonce, started)
    finally:
        sandbox.close()


async def end_warm(sandbox: Started) -> None:
    """End a sandbox started ahead that no run took: its harness reads the end of its stdin and exits.
    Not killed: bwrap killed while it still sets the sandbox up can leave it to its backstop."""
    process = sandbox.process
    assert process.stdin is not None
    process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), KILL_GRACE)
    except asyncio.TimeoutError:
        _kill(process)
        await process.wait()
    finally:  # also when the caller stops waiting: the harness still reads the end of its stdin
        sandbox.close()


async def _supervise(
    process: asyncio.subprocess.Process, job: Job, report: int | None, nonce: str, started: float
) -> SandboxResult:
    async def finish() -> tuple[tuple[bytes, bool], tuple[bytes, bool]]:
        out, err = await asyncio.gather(_capped(process.stdout), _capped(process.stderr))
        await process.wait()
        return out, err

    done = asyncio.ensure_future(finish())
    timed_out = False
    try:
        finished, _ = await asyncio.wait({done}, timeout=job.timeout)
        if not finished:
            timed_out = True
            _kill(process)
            finished, _ = await asyncio.wait({done}, timeout=KILL_GRACE)
            if not finished:
                return _infra("the sandbox did not end after it was killed", started)
    finally:
        if process.returncode is None:  # cancelled, or stuck: nothing outlives the run
            _kill(process)
        if not done.done():
            done.cancel()
    (stdout, out_cut), (stderr, err_cut) = done.result()
    lines = _report(report, nonce)
    outcome, error, code = classify(job, process.returncode, timed_out, lines, stderr)
    passed, total = test_counts(job, outcome, lines)
    return SandboxResult(
        outcome=outcome,
        exit_code=code,
        stdout=stdout.decode("utf-8", errors="replace"),
        stderr=stderr.decode("utf-8", errors="replace"),
        duration=time.monotonic() - started,
        tests_passed=passed,
        tests_total=total,
        stdout_truncated=out_cut,
        stderr_truncated=err_cut,
        error=error,
    )


def _report(report: int | None, nonce: str) -> list[str]:
    if report is None:
        return []
    prefix = f"{nonce} "
    text = _read_all(report).decode("ascii", errors="replace")
    return [line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)]


def classify(
    job: Job, returncode: int | None, timed_out: bool, lines: list[str], stderr: bytes
) -> tuple[SandboxOutcome, str | None, int | None]:
    """How a run ended, from its exit status, the deadline, the harness's report lines and stderr:
    the outcome, its error and the exit code to show (every tier reads a run the same way)."""
    if timed_out:
        return SandboxOutcome.TIMEOUT, f"killed at the {job.timeout:g} s timeout", None
    code = returncode if returncode is not None and returncode >= 0 else None
    last = stderr.rstrip().rsplit(b"\n", 1)[-1]
    if job.command is None:
        if "started" not in lines:
            return SandboxOutcome.INFRA_ERROR, _bwrap_complaint(stderr, returncode), code
        out_of_memory = "memory" in lines
    else:
        if returncode == 1 and stderr.startswith(b"bwrap: "):
            return SandboxOutcome.INFRA_ERROR, _bwrap_complaint(stderr, returncode), code
        out_of_memory = last.startswith(b"MemoryError")
    if out_of_memory:
        return SandboxOutcome.MEMORY, f"out of memory (limit {job.memory_mb} MB of address space)", code
    number = (returncode or 0) - 128
    if number == signal.SIGXCPU:
        cpu = max(1, math.ceil(job.timeout * job.cpus))
        return SandboxOutcome.TIMEOUT, f"killed at its CPU-time limit of {cpu} s", code
    if 0 < number < 65:
        return SandboxOutcome.CRASHED, f"killed by {_signal_name(number)}", code
    if code == 0 and (job.tests is None or _passed(lines) == len(job.tests)):
        return SandboxOutcome.PASSED, None, code
    return SandboxOutcome.FAILED, None, code


def _passed(lines: list[str]) -> int:
    return len({line for line in lines if line.startswith("pass ")})


def test_counts(job: Job, outcome: SandboxOutcome, lines: list[str]) -> tuple[int | None, int | None]:
    """(tests passed, tests in all) of a run from its harness's report lines; neither for a job
    without tests or a run the sandbox never started."""
    if job.tests is None or outcome is SandboxOutcome.INFRA_ERROR:
        return None, None
    return _passed(lines), len(job.tests)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _bwrap_complaint(stderr: bytes, returncode: int | None) -> str:
    for line in stderr.decode("utf-8", errors="replace").splitlines():
        if line.startswith("bwrap: "):
            return f"the sandbox could not start: {line[len('bwrap: ') :]}"
    return f"the sandbox did not start the code (exit status {returncode})"


def _infra(error: str, started: float) -> SandboxResult:
    return SandboxResult(SandboxOutcome.INFRA_ERROR, None, "", "", time.monotonic() - started, error=error)
