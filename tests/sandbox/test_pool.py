"""SandboxPool: runs of code in local sandboxes started ahead of them, read as ``run`` reads its own;
a sandbox too old or gone is never used, and none outlives the pool or its process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from benchmarks.chaos_runtime import living, marked, wait_gone
from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox import SandboxOutcome, SandboxPool, run
from osmosis_ai.sandbox import pool as pool_module
from osmosis_ai.sandbox.api import _job
from osmosis_ai.sandbox.local import Started, end_warm, run_warm
from osmosis_ai.sandbox.pool import LIFETIME
from tests.support.waiting import wait_until

CODE = "def double(x):\n    return 2 * x\n"
TESTS = ["assert double(1) == 2", "assert double(2) == 5", "assert double(0) == 0"]


async def test_a_run_in_a_started_sandbox_ends_as_a_fresh_one_would() -> None:
    async with SandboxPool(2, warm=2, timeout=2, memory_mb=256) as pool:
        await asyncio.gather(*pool._starting)
        waiting = [sandbox.process.pid for sandbox in pool._ready]
        assert len(waiting) == 2
        cases = [
            (CODE, TESTS),
            (
                "import sys\nprint(repr(sys.stdin.read()), open('data/in.txt').read(), len(open('big').read()))",
                None,
            ),
            ("import os\nos.kill(os.getpid(), 9)", None),
            ("import time\ntime.sleep(30)", None),
            ("x = bytearray(1 << 30)", None),
            ("def broken(:\n", ["assert True"]),
        ]
        outcomes = []
        for code, tests in cases:
            files = {"data/in.txt": "given", "big": "x" * (1 << 20)}  # more than a pipe holds
            warm = await pool.run(code, files=files, tests=tests)
            cold = await run(code, files=files, tests=tests, timeout=2, memory_mb=256)
            assert (warm.outcome, warm.exit_code, warm.tests_passed, warm.tests_total, warm.stdout) == (
                cold.outcome, cold.exit_code, cold.tests_passed, cold.tests_total, cold.stdout
            ), code  # fmt: skip
            outcomes.append((warm.outcome, warm.tests_passed, warm.stdout))
        assert living(set(waiting)) == set()  # the first two runs took those two
    assert outcomes == [
        (SandboxOutcome.FAILED, 2, ""),
        (SandboxOutcome.PASSED, None, "'' given 1048576\n"),  # stdin empty, as in a fresh one
        (SandboxOutcome.CRASHED, None, ""),
        (SandboxOutcome.TIMEOUT, None, ""),
        (SandboxOutcome.MEMORY, None, ""),
        (SandboxOutcome.FAILED, 0, ""),
    ]


async def test_files_that_take_most_of_the_memory_limit_run_as_in_a_fresh_sandbox() -> None:
    """A fresh sandbox gets its files from the outside; a started one must not hold them in the
    harness's memory (capped at ``memory_mb`` like the code's) on their way to the disk."""
    files = {"data.bin": b"x" * (60 << 20)}
    code = "import os\nprint(os.path.getsize('data.bin'))"
    async with SandboxPool(1, warm=1, timeout=10, memory_mb=128) as pool:
        await asyncio.gather(*pool._starting)
        assert len(pool._ready) == 1
        warm = await pool.run(code, files=files)
    cold = await run(code, files=files, timeout=10, memory_mb=128)
    assert (cold.outcome, cold.stdout) == (SandboxOutcome.PASSED, f"{60 << 20}\n"), cold
    assert (warm.outcome, warm.stdout) == (cold.outcome, cold.stdout), warm


async def test_a_sandbox_too_old_or_gone_is_ended_and_the_run_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ended: list[Started] = []

    async def ending(sandbox: Started) -> None:  # the real end, each sandbox it is given noted
        ended.append(sandbox)
        await end_warm(sandbox)

    monkeypatch.setattr(pool_module, "end_warm", ending)
    async with SandboxPool(1, warm=2) as pool:
        await asyncio.gather(*pool._starting)
        old, gone = pool._ready
        old.at -= LIFETIME
        assert gone.process.stdin is not None
        gone.process.stdin.close()  # its harness ends, as at its backstop
        await gone.process.wait()
        result = await pool.run(CODE, tests=TESTS[:1])
        assert result.outcome is SandboxOutcome.PASSED
        assert ended[:2] == [old, gone]  # neither took the run: a fresh sandbox did
        assert living({old.process.pid}) == set()
    assert pool._ready == []


async def test_closing_the_pool_ends_every_sandbox_no_run_took() -> None:
    async with SandboxPool(2, warm=3) as pool:
        await asyncio.gather(*pool._starting)
        waiting = [sandbox.process.pid for sandbox in pool._ready]
    assert len(waiting) == 3 and living(set(waiting)) == set()
    with pytest.raises(SandboxSettingError, match="closed"):
        await pool.run(CODE)


async def test_a_run_stopped_while_its_files_are_sent_never_reaches_its_sandbox(tmp_path: Path) -> None:
    """The sandbox is ended and its stdin cut, not sent on in the background: a harness would otherwise
    read the whole run later and start the code with nobody supervising it."""
    job = _job("print('never')", {"big": b"x" * (1 << 20)}, None, None, 5, 256, 1, False, None)
    files = sum(len(data) for data in job.files.values())  # less than the whole run
    gate = tmp_path / "read"
    # Stands in for a harness slow to start: it reads its stdin only once the gate exists.
    process = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", f'while [ ! -e "{gate}" ]; do sleep 0.01; done; wc -c', start_new_session=True,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None
    transport = process.stdin.transport
    try:
        running = asyncio.ensure_future(run_warm(Started(process, None, [], time.monotonic()), job))
        await asyncio.to_thread(wait_until, lambda: transport.get_write_buffer_size() > 0, 30)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        gate.touch()
        out, _ = await asyncio.wait_for(process.communicate(), 30)  # the bound only ends a failing test
        assert int(out or b"0") < files  # ended, or it read less than the whole run
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)


async def test_a_sandbox_ended_by_a_caller_that_stops_waiting_leaves_no_descriptor_open() -> None:
    # Stands in for a sandbox slow to end: it does not read its stdin.
    process = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", "sleep 60", stdin=asyncio.subprocess.PIPE, start_new_session=True
    )
    kept, other = os.pipe()
    os.close(other)
    sandbox = Started(process, kept, [kept], time.monotonic())
    try:
        ending = asyncio.ensure_future(end_warm(sandbox))
        await asyncio.to_thread(
            wait_until, lambda: process.stdin is not None and process.stdin.is_closing(), 30
        )
        ending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ending
        assert sandbox.owned == []  # closed (Started.close)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


def test_started_sandboxes_end_with_the_process_that_started_them() -> None:
    marker = f"osmosis-pool-{uuid.uuid4().hex}"  # in each sandbox's command line (bwrap's --setenv)
    script = textwrap.dedent(
        f"""
        import asyncio
        from osmosis_ai.sandbox import SandboxPool

        async def main():
            async with SandboxPool(2, warm=3, env={{"MARK": "{marker}"}}) as pool:
                await asyncio.gather(*pool._starting)
                print(" ".join(str(s.process.pid) for s in pool._ready), flush=True)
                await asyncio.sleep(600)

        asyncio.run(main())
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    started = {int(pid) for pid in owner.stdout.readline().split()}  # each one's outer `timeout`
    sandboxes = marked(marker) - {owner.pid}  # those and their bwraps
    assert len(started) == 3 and started < sandboxes and living(sandboxes) == sandboxes
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    # each harness reads the end of its stdin and exits, its bwrap and `timeout` with it, long
    # before the backstop (LIFETIME + timeout) would end them
    assert wait_gone(started | sandboxes, limit=LIFETIME / 2) == set()


def test_bad_pool_settings_are_refused() -> None:
    with pytest.raises(SandboxSettingError, match="size must be a whole number of at least 1"):
        SandboxPool(0)
    with pytest.raises(SandboxSettingError, match="warm must be a whole number of at least 0"):
        SandboxPool(2, warm=-1)
    with pytest.raises(SandboxSettingError, match="timeout"):
        SandboxPool(2, timeout=0)
