"""``SandboxPool``: a bounded number of local runs at once, each in a sandbox started ahead of it.

A local run spends most of its time before the code starts, and most of that waiting on the kernel
(namespaces made and torn down), not on a core: ``benchmarks/sandbox_throughput.py`` measures how
much sooner runs end when their sandbox (bwrap, its namespaces, the harness's interpreter) is started
while the previous run works. Each sandbox still serves one run: the pool keeps ``warm`` of them
started, all with the pool's limits, network and environment; a run takes one, sends its files and
tests on the harness's stdin, and a replacement starts at once. A sandbox started more than
:data:`LIFETIME` seconds ago is ended rather than used; when none is ready the run starts its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from types import TracebackType

from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox.api import _job
from osmosis_ai.sandbox.local import Started, end_warm, run_local, run_warm, start_warm
from osmosis_ai.sandbox.machine import Machine, probe
from osmosis_ai.sandbox.result import SandboxResult

LIFETIME = 60.0
"""Seconds a sandbox started ahead waits for a run before it is ended unused."""


class SandboxPool:
    """At most ``size`` runs of code at once, each in a local sandbox started ahead of it (``warm`` of
    them kept ready or starting, ``2 * size`` by default: a sandbox takes about twice a short run's
    time to start, so fewer leave runs waiting for one). ``timeout``, ``memory_mb``, ``cpus``, ``network`` and ``env``
    are the pool's, as :func:`~osmosis_ai.sandbox.run` takes them; :meth:`run` takes the code, its
    files and tests. Use it as ``async with SandboxPool(...) as pool:`` on one event loop; leaving the
    block ends the sandboxes no run took."""

    def __init__(
        self,
        size: int = 2,
        *,
        warm: int | None = None,
        timeout: float = 10.0,
        memory_mb: int = 512,
        cpus: int = 1,
        network: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        warm = 2 * size if warm is None else warm
        for setting, number, least in (("size", size, 1), ("warm", warm, 0)):
            if isinstance(number, bool) or not isinstance(number, int) or number < least:
                raise SandboxSettingError(
                    f"{setting} must be a whole number of at least {least}, got {number!r}"
                )
        self.settings = _job("", None, None, None, timeout, memory_mb, cpus, network, env)
        self.size = size
        self.warm = warm
        self._slots = asyncio.Semaphore(size)
        self._ready: list[Started] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._closed = False

    async def __aenter__(self) -> SandboxPool:
        self._fill(await probe())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    def _fill(self, machine: Machine) -> None:
        """Start sandboxes until ``warm`` are ready or starting."""
        for _ in range(self.warm - len(self._ready) - len(self._starting)):
            self._start(machine)

    def _start(self, machine: Machine) -> None:
        async def started() -> None:
            with contextlib.suppress(OSError):  # bwrap could not start: the run starts its own, and says why
                sandbox = await start_warm(self.settings, machine, LIFETIME)
                if self._closed:
                    await end_warm(sandbox)
                else:
                    self._ready.append(sandbox)

        if machine.tier is not None and machine.python is not None and not self._closed:
            task = asyncio.ensure_future(started())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _take(self, machine: Machine) -> Started | None:
        """A started sandbox still waiting for its run and young enough to serve it, if one is ready."""
        while self._ready:
            sandbox = self._ready.pop(0)
            self._fill(machine)
            if sandbox.process.returncode is None and time.monotonic() - sandbox.at < LIFETIME:
                return sandbox
            await end_warm(sandbox)
        self._fill(machine)
        return None

    async def run(
        self,
        code: str | None = None,
        *,
        files: Mapping[str, str | bytes] | None = None,
        tests: Sequence[str] | None = None,
    ) -> SandboxResult:
        """Run ``code`` (as ``main.py``, with ``files`` and ``tests``, as :func:`~osmosis_ai.sandbox.run`
        does) in the next sandbox; waits while ``size`` runs are under way."""
        if self._closed:
            raise SandboxSettingError("this SandboxPool is closed: make a new one")
        base = self.settings
        job = _job(code, files, None, tests, base.timeout, base.memory_mb, base.cpus, base.network, base.env)
        machine = await probe()
        async with self._slots:
            sandbox = await self._take(machine)
            if sandbox is not None:
                result = await run_warm(sandbox, job)
                if result is not None:
                    return result
            return await run_local(job, machine)

    async def close(self) -> None:
        """End the sandboxes no run took, and those still starting."""
        self._closed = True
        await asyncio.gather(*self._starting, return_exceptions=True)
        ready, self._ready = self._ready, []
        await asyncio.gather(*(end_warm(sandbox) for sandbox in ready))
