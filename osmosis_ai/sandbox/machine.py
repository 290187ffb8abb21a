"""What this machine offers a sandbox, found once per process: :func:`probe` -> :class:`Machine`.

The local tier needs bubblewrap (``bwrap`` on PATH, or the file ``$OSMOSIS_SANDBOX_BWRAP`` names)
and the right to make user, PID, mount and network namespaces, which only a real start proves:
:func:`probe` starts one empty sandbox with the same namespaces every run uses, with the seccomp
filter (:mod:`osmosis_ai.sandbox.seccomp`). ``prlimit`` (util-linux) sets the resource limits
inside; ``timeout`` (coreutils) bounds each run without its caller: bwrap runs under one, and one is
the sandbox's PID 1. Landlock and cgroups are looked at and reported, not used by this tier
(docs/design/sandbox.md).

A machine without namespaces or bwrap gets no tier: :attr:`Machine.refusal` says why, and every run
ends ``infra_error`` with that sentence. There is no weaker fallback.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_ai.sandbox import seccomp

NOBODY = 65534
"""The uid and gid code runs as inside the sandbox, and the real uid bwrap runs as when we are root."""

SYSTEM_PYTHON = "/usr/bin/python3"

BWRAP_ENV = "OSMOSIS_SANDBOX_BWRAP"
"""The environment variable naming the bubblewrap executable to use instead of ``bwrap`` on PATH."""


@dataclass(frozen=True)
class Mechanism:
    """One isolation mechanism: whether this machine has it, whether the local tier uses it, and what it stops."""

    name: str
    available: bool
    used: bool
    detail: str
    protects: str


@dataclass(frozen=True)
class Machine:
    """The local tier's view of this machine. ``tier`` is ``"local"`` or ``None`` (then ``refusal`` says why)."""

    tier: str | None
    refusal: str | None
    bwrap: str | None
    prlimit: str | None
    timeout: str | None
    python: str | None
    python_prefix: str | None
    python_note: str
    run_as: int | None
    seccomp_filter: bytes | None
    mechanisms: tuple[Mechanism, ...]


def _readable_by_others(path: str) -> bool:
    """Whether a process of another uid (the sandbox's, when we are root) reaches ``path``."""
    current = Path(path)
    for directory in [current, *current.parents]:
        try:
            mode = directory.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return True


def _python(run_as: int | None) -> tuple[str | None, str | None, str]:
    """The interpreter Python code runs with, its prefix to bind, and why that one."""
    prefix = sys.base_prefix
    executable = os.path.realpath(sys.executable)
    if not executable.startswith(prefix.rstrip("/") + "/"):  # a venv's own copy: use the base's
        executable = os.path.join(prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if os.access(executable, os.X_OK) and (run_as is None or _readable_by_others(prefix)):
        return executable, prefix, f"the running interpreter's ({prefix})"
    if os.access(SYSTEM_PYTHON, os.X_OK):
        reason = (
            f"{prefix} is not readable by uid {NOBODY}" if run_as is not None else f"{executable} is missing"
        )
        return SYSTEM_PYTHON, None, f"the system's, since {reason}"
    return None, None, "none: neither the running interpreter nor /usr/bin/python3 can be used"


def _landlock_abi() -> int:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version: int = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    except (OSError, AttributeError):
        return -1
    return version


def _seccomp() -> bool:
    try:
        return "Seccomp:" in Path("/proc/self/status").read_text()
    except OSError:
        return False


def _cgroups() -> tuple[bool, str]:
    root = Path("/sys/fs/cgroup")
    for candidate in (root, root / "unified"):
        controllers = candidate / "cgroup.controllers"
        if controllers.exists():
            names = controllers.read_text().split()
            writable = os.access(candidate, os.W_OK)
            return (
                writable and {"memory", "pids"} <= set(names),
                f"v2 at {candidate}, controllers: {' '.join(names) or 'none'}, "
                + ("writable" if writable else "not writable"),
            )
    if (root / "memory").is_dir():
        return False, "v1 only (memory, pids under /sys/fs/cgroup/<controller>)"
    return False, "none mounted"


async def _starts(bwrap: str, run_as: int | None, seccomp_filter: bytes | None) -> str | None:
    """None when an empty sandbox with every namespace (and the filter) starts, else bwrap's own complaint."""
    argv = [bwrap, *namespaces(network=False), "--ro-bind", "/usr", "/usr", *usr_links()]
    read, write = os.pipe()
    if seccomp_filter is not None:
        argv += ["--seccomp", str(read)]
        os.write(write, seccomp_filter)  # a few hundred bytes: the pipe holds them
    os.close(write)
    argv.append("/usr/bin/true")
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env={"PATH": "/usr/bin:/bin"}, pass_fds=[read],
            **drop_privileges(run_as),
        )  # fmt: skip
        _, err = await asyncio.wait_for(process.communicate(), 10)
    except (OSError, asyncio.TimeoutError) as exc:
        return f"bwrap could not be started: {exc}"
    finally:
        os.close(read)
    if process.returncode == 0:
        return None
    complaint = err.decode(errors="replace").strip().splitlines()
    return complaint[-1] if complaint else f"bwrap exited {process.returncode}"


def namespaces(*, network: bool) -> list[str]:
    """bwrap's options for a fresh user, PID, mount, IPC, UTS (and network unless asked) namespace."""
    options = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        options.append("--unshare-net")
    return [*options, "--disable-userns", "--uid", str(NOBODY), "--gid", str(NOBODY)]


def usr_links() -> list[str]:
    """/bin, /lib, /lib64 and /sbin as the merged-/usr links, or read-only binds where they are directories."""
    options: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", name)
        if path.is_symlink():
            options += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            options += ["--ro-bind", str(path), str(path)]
    return options


def drop_privileges(run_as: int | None) -> dict[str, Any]:
    """Keyword arguments that start bwrap as ``run_as`` (no supplementary groups) when we are root."""
    if run_as is None:
        return {}
    return {"user": run_as, "group": run_as, "extra_groups": []}


_machine: Machine | None = None


async def probe() -> Machine:
    """This machine, found on the first call (one empty sandbox started) and remembered. Two first
    calls at once may both look: the answer is the same."""
    global _machine
    if _machine is None:
        _machine = await _find()
    return _machine


def _bwrap() -> tuple[str | None, str | None]:
    """bubblewrap's path (``$OSMOSIS_SANDBOX_BWRAP``, else ``bwrap`` on PATH), or why there is none."""
    named = os.environ.get(BWRAP_ENV)
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return named, None
        return None, f"{BWRAP_ENV}={named} is not an executable file: point it at bwrap, or unset it"
    found = shutil.which("bwrap")
    if found is None:
        return None, (
            "bubblewrap is not installed (bwrap not on PATH): install it (Debian/Ubuntu: apt-get install bubblewrap)"
        )
    return found, None


async def _find() -> Machine:
    bwrap, missing = _bwrap()
    prlimit = shutil.which("prlimit", path="/usr/bin:/bin")
    timeout = shutil.which("timeout", path="/usr/bin:/bin")
    run_as = NOBODY if os.geteuid() == 0 else None
    python, prefix, python_note = _python(run_as)
    seccomp_filter = seccomp.program() if _seccomp() else None
    refusal: str | None
    if sys.platform != "linux":
        refusal = f"the local sandbox needs Linux namespaces; this is {sys.platform}"
    elif bwrap is None:
        refusal = missing
    elif prlimit is None:
        refusal = (
            "prlimit (util-linux) is not in /usr/bin or /bin: the sandbox cannot set its resource limits"
        )
    elif timeout is None:
        refusal = "timeout (coreutils) is not in /usr/bin or /bin: the sandbox cannot bound its own life"
    else:
        problem = await _starts(bwrap, run_as, seccomp_filter)
        refusal = (
            None if problem is None else f"bubblewrap cannot make the sandbox's namespaces here: {problem}"
        )
    ok = refusal is None
    landlock = _landlock_abi()
    cgroups_usable, cgroups_detail = _cgroups()
    mechanisms = (
        Mechanism("bubblewrap", bwrap is not None, ok, bwrap or "not installed",
                  "builds the sandbox: namespaces, read-only binds, tmpfs, clean environment"),
        Mechanism("user namespace", ok, ok, f"code runs as uid {NOBODY}, no capabilities, no nested user namespaces",
                  "no root, no capabilities over the host; its files and signals reach nothing outside"),
        Mechanism("PID namespace", ok, ok, "the run's own PID 1; it dies with bwrap (--die-with-parent)",
                  "sees and signals only its own processes (kill -9 -1); nothing outlives the run"),
        Mechanism("mount namespace", ok, ok, "read-only /usr and the interpreter; tmpfs /tmp and work dir",
                  "no secrets, home, /work or /root; writes land in size-capped tmpfs and vanish"),
        Mechanism("network namespace", ok, ok, "loopback of its own unless network=True",
                  "no connection to the host's loopback services or the outside"),
        Mechanism("rlimits (prlimit)", prlimit is not None, ok, prlimit or "not found",
                  "CPU seconds, address space, processes, file size and open files per process"),
        Mechanism("deadline backstop (timeout)", timeout is not None, ok, timeout or "not found",
                  "ends each sandbox at its deadline + 2 s by itself, also when its caller was killed"),
        Mechanism("unprivileged uid", True, run_as is not None,
                  f"bwrap runs as uid {NOBODY}" if run_as is not None else f"bwrap runs as uid {os.geteuid()}",
                  "as root the process limit would not apply (the kernel exempts root) and an escape would be root"),
        Mechanism("seccomp", _seccomp(), ok and seccomp_filter is not None,
                  f"{len(seccomp.DENIED_X86_64)} system calls fail with EPERM, other ABIs killed (bwrap --seccomp)"
                  if seccomp_filter is not None else "no filter for this architecture",
                  "ptrace, bpf, io_uring, keyctl, perf events, module and mount calls: kernel surface cut"),
        Mechanism("Landlock", landlock > 0, False, f"ABI {landlock}" if landlock > 0 else "not available",
                  "would restrict file access without namespaces (not used: the mount namespace does it)"),
        Mechanism("cgroups", cgroups_usable, False, cgroups_detail,
                  "would cap the run's total memory and processes (not used: rlimits are per process)"),
    )  # fmt: skip
    return Machine(
        tier="local" if ok else None,
        refusal=refusal,
        bwrap=bwrap,
        prlimit=prlimit,
        timeout=timeout,
        python=python,
        python_prefix=prefix,
        python_note=python_note,
        run_as=run_as,
        seccomp_filter=seccomp_filter if ok else None,
        mechanisms=mechanisms,
    )
