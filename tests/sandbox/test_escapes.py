"""The escape suite: what model-written code may try, each contained with the right typed result.

Limits and timeouts are small so the whole file takes seconds. Nothing here sleeps to prove a point:
a process that would outlive the run is looked for by a marker it would write and by its PID.
"""

from __future__ import annotations

import fcntl
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from osmosis_ai.sandbox import SandboxOutcome, run
from osmosis_ai.sandbox.local import BACKSTOP_GRACE

SECRET = "s3cr3t-bytes-only-the-host-has"
KEY = "sk-test-0123456789abcdef-never-inside"


def _never_shows(result, *needles: str) -> None:  # type: ignore[no-untyped-def]
    for needle in needles:
        assert (
            needle not in result.stdout and needle not in result.stderr and needle not in (result.error or "")
        )


def _host_addresses() -> list[str]:
    """This machine's own non-loopback IPv4 addresses: reachable only through the host's network."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(
                    probe.fileno(), 0x8915, struct.pack("256s", name.encode())
                )  # SIOCGIFADDR
            except OSError:  # no IPv4 address
                continue
            address = socket.inet_ntoa(packed[20:24])
            if not address.startswith("127."):
                found.append(address)
    return found


async def test_no_connection_to_a_host_service_and_no_route_out() -> None:
    # Only addresses of this machine are tried: were the sandbox to share the network, no packet
    # would leave the machine. The way out is shown closed by the namespace having no route.
    with socket.socket() as server:
        server.bind(("0.0.0.0", 0))
        server.listen()
        port = server.getsockname()[1]
        targets = ["127.0.0.1", *_host_addresses()]
        code = textwrap.dedent(f"""
            import os, socket
            for host in {targets!r}:
                try:
                    socket.create_connection((host, {port}), timeout=1).close()
                    print("connected", host)
                except OSError as exc:
                    print("refused", host, type(exc).__name__)
            print("interfaces", sorted(name for _, name in socket.if_nameindex()))
            print("routes", len(open("/proc/net/route").read().splitlines()) - 1)
        """)
        result = await run(code, timeout=5)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody reached the host's listening socket
    assert result.outcome is SandboxOutcome.PASSED, result.stderr
    assert "connected" not in result.stdout and result.stdout.count("refused") == len(targets)
    assert "interfaces ['lo']" in result.stdout and "routes 0" in result.stdout


async def test_a_secret_file_and_the_parents_api_key_stay_outside(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    monkeypatch.setenv("OSMOSIS_TEST_API_KEY", KEY)
    code = textwrap.dedent(f"""
        import os
        for path in ({str(secret)!r}, "/root/.bashrc", "/work", "/proc/1/environ", "/etc/passwd"):
            try:
                print(path, open(path).read())
            except OSError as exc:
                print(path, "unreadable", type(exc).__name__)
        print(sorted(os.environ))
        print(os.environ.get("OSMOSIS_TEST_API_KEY"))
    """)
    result = await run(code)
    assert result.outcome is SandboxOutcome.PASSED
    _never_shows(result, SECRET, KEY)
    names = result.stdout.splitlines()[-2]
    assert names in ("['HOME', 'LANG', 'PATH']", "['HOME', 'LANG', 'PATH', 'PWD']")


async def test_writes_outside_the_tmpfs_fail_and_leave_nothing(tmp_path: Path) -> None:
    target = tmp_path / "written-by-sandbox"
    code = textwrap.dedent(f"""
        for path in ({str(target)!r}, "/usr/evil", "/etc/evil", "/evil"):
            try:
                open(path, "w").write("x")
                print("wrote", path)
            except OSError as exc:
                print("refused", path)
        open("/tmp/ok", "w").write("fine")
        open("/sandbox/ok", "w").write("fine")
    """)
    result = await run(code)
    assert result.outcome is SandboxOutcome.PASSED, result.stderr
    assert "wrote" not in result.stdout and result.stdout.count("refused") == 4
    assert not target.exists() and not Path("/usr/evil").exists() and not Path("/evil").exists()


async def test_a_fork_bomb_hits_the_process_limit_and_the_deadline() -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = await run(code, timeout=1.5)
    assert result.outcome is SandboxOutcome.TIMEOUT
    assert result.duration < 10


async def test_the_process_limit_holds_even_when_the_caller_is_root() -> None:
    # The kernel exempts processes whose real uid is root from RLIMIT_NPROC; the sandbox's is not.
    code = textwrap.dedent("""
        import os
        read, write = os.pipe()
        made = 0
        try:
            while made < 1000:
                if os.fork() == 0:
                    os.read(read, 1)  # held until the run ends
                    os._exit(0)
                made += 1
        except OSError as exc:
            print("refused after", made, type(exc).__name__)
    """)
    result = await run(code, timeout=10)
    assert result.outcome is SandboxOutcome.PASSED, result.stderr
    assert result.stdout.startswith("refused after") and int(result.stdout.split()[2]) < 64


async def test_a_memory_bomb_is_out_of_memory() -> None:
    result = await run(
        "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))", memory_mb=128
    )
    assert result.outcome is SandboxOutcome.MEMORY and "128 MB" in (result.error or "")


async def test_an_infinite_loop_is_a_timeout() -> None:
    result = await run("while True:\n    pass", timeout=0.5)
    assert result.outcome is SandboxOutcome.TIMEOUT and result.exit_code is None


async def test_kill_minus_one_kills_only_the_sandbox() -> None:
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        # kill(-1) spares its caller, so a shell's `kill -9 -1` is what takes the code's process down
        result = await run("import os\nos.system('kill -9 -1')\nprint('survived')")
        assert result.outcome is SandboxOutcome.CRASHED and result.error == "killed by SIGKILL"
        assert bystander.poll() is None  # a host process of the same machine is untouched
    finally:
        bystander.kill()
        bystander.wait()


async def test_ctypes_gives_no_way_out() -> None:
    code = textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        print("setuid", libc.setuid(0), os.getuid())
        print("unshare", libc.unshare(0x10000000))  # CLONE_NEWUSER: no nested user namespace
        print("mount", libc.mount(b"none", b"/usr", b"tmpfs", 0, None))
    """)
    result = await run(code)
    assert result.outcome is SandboxOutcome.PASSED
    assert (
        "setuid -1 65534" in result.stdout and "unshare -1" in result.stdout and "mount -1" in result.stdout
    )


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the seccomp denylist has x86-64 numbers only")
async def test_the_seccomp_filter_denies_kernel_surface() -> None:
    code = textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        for name, number, args in [("ptrace", 101, (16, 1, 0, 0)), ("bpf", 321, (0, 0, 0)),
                                   ("io_uring_setup", 425, (1, 0)), ("keyctl", 250, (0, 0, 0))]:
            print(name, libc.syscall(number, *args), ctypes.get_errno())
        print("getppid", libc.syscall(110) > 0)
    """)
    result = await run(code)
    assert result.outcome is SandboxOutcome.PASSED, result.stderr
    for name in ("ptrace", "bpf", "io_uring_setup", "keyctl"):
        assert f"{name} -1 1\n" in result.stdout  # EPERM
    assert "getppid True" in result.stdout


async def test_a_double_forked_child_does_not_outlive_the_run(tmp_path: Path) -> None:
    # Its PID inside the sandbox is not the host's, so the test finds it by the marker in its command line.
    marker = f"osmosis-sandbox-orphan-{os.getpid()}-{tmp_path.name}"
    code = textwrap.dedent(f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time\\nwhile True: time.sleep(1)", {marker!r}])
            os._exit(0)
        print("parent done")
    """)
    result = await run(code, timeout=5)
    assert result.outcome is SandboxOutcome.PASSED and "parent done" in result.stdout
    survivors = [entry for entry in os.listdir("/proc") if entry.isdigit() and _cmdline_has(entry, marker)]
    assert survivors == []


def _cmdline_has(pid: str, marker: str) -> bool:
    try:
        return marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


async def test_nothing_outlives_a_killed_caller(tmp_path: Path) -> None:
    marker = f"osmosis-sandbox-caller-{os.getpid()}-{tmp_path.name}"
    script = textwrap.dedent(f"""
        import sys
        from osmosis_ai.sandbox import run_sync
        print("go", flush=True)
        run_sync("import os, sys\\nos.execv(sys.executable, [sys.executable, '-c', 'while True: pass', {marker!r}])", timeout=3)
    """)
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env={**os.environ})
    try:
        assert caller.stdout is not None and caller.stdout.readline() == b"go\n"
        for _ in range(200):  # the sandbox is up once its harness runs the code
            if _sandboxed_code_running(marker):
                break
            os.sched_yield()
            await _tick()
        assert _sandboxed_code_running(marker), "the sandbox never started"
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        # Orphaned, the run ends by its deadline plus the backstop's grace at the latest.
        for _ in range(int((3 + BACKSTOP_GRACE + 10) / 0.05)):
            if not _sandboxed_code_running(marker):
                break
            await _tick()
        assert not _sandboxed_code_running(marker)
    finally:
        caller.kill()
        caller.wait()


def _sandboxed_code_running(marker: str) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


async def _tick() -> None:
    import asyncio

    await asyncio.sleep(0.05)


async def test_filling_the_disk_stops_at_the_tmpfs_cap() -> None:
    code = textwrap.dedent("""
        import os
        written = 0
        try:
            with open("/sandbox/fill", "wb") as out:
                while True:
                    out.write(b"x" * (1 << 20))
                    written += 1
        except OSError as exc:
            print("stopped", type(exc).__name__, written)
        try:
            with open("/tmp/more", "wb") as out:
                while True:
                    out.write(b"x" * (1 << 20))
        except OSError as exc:
            print("stopped again", type(exc).__name__)
    """)
    result = await run(code, memory_mb=48)
    assert result.outcome is SandboxOutcome.PASSED, result.stderr
    assert "stopped OSError" in result.stdout and "stopped again OSError" in result.stdout


async def test_network_true_shares_the_hosts_network() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).close()\nprint('connected')"
        result = await run(code, network=True, timeout=5)
        connection, _ = server.accept()
        connection.close()
    assert result.outcome is SandboxOutcome.PASSED and result.stdout == "connected\n"
