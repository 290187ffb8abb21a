"""Where a run's items go: this process, local worker processes, or a pool of Ray workers.

:func:`open_backend` is given how to open the in-process pipeline and, for the others, the
:class:`~osmosis_ai.runs.backends.ray.WorkerSpec` their workers build the same pipeline from. It
gives back a :class:`Backend` whose :meth:`~Backend.ready` is the ``process`` to hand the run engine.
The workers start as the backend is entered, so the run's preflight overlaps their start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from osmosis_ai.outcome import plural
from osmosis_ai.runs.engine import ProcessItem

if TYPE_CHECKING:
    from osmosis_ai.runs.backends.ray import WorkerSpec


class Backend:
    """Where a run's items go: :meth:`ready` gives the ``process`` a run hands
    :func:`~osmosis_ai.runs.engine.run_items`; then :attr:`workers` counts the workers in use."""

    def __init__(self, start: Callable[[], Awaitable[ProcessItem]], kind: str = "local") -> None:
        self._start = start
        self._kind = kind
        self._process: ProcessItem | None = None

    async def ready(self) -> ProcessItem:
        """The process, once it can take items: the local pipeline built, or the workers started
        (they start when the backend is entered, so work done before this call overlaps theirs)."""
        if self._process is None:
            self._process = await self._start()
        return self._process

    @property
    def workers(self) -> int:
        """The workers in use now (0 for a local run, or before :meth:`ready`)."""
        return int(getattr(self._process, "workers", 0))

    def note(self) -> str:
        """What the summary line adds: where the items ran (nothing for a local run)."""
        workers = self.workers
        if not workers:
            return ""
        if self._kind == "processes":
            return f"; in {_processes(workers)}"
        return f"; on {workers} Ray {plural('worker', workers)}"

    def header(self) -> str | None:
        """The header line naming the workers in use (``None`` for a local run)."""
        workers = self.workers
        if not workers:
            return None
        if self._kind == "processes":
            return f"Backend: {_processes(workers)}"
        return f"Backend: Ray, {workers} {plural('worker', workers)}"


def _processes(count: int) -> str:
    return f"{count} worker {'process' if count == 1 else 'processes'}"


@contextlib.asynccontextmanager
async def open_backend(
    kind: str,
    local: Callable[[], contextlib.AbstractAsyncContextManager[ProcessItem]],
    *,
    spec: WorkerSpec,
    concurrency: int,
    address: str | None = None,
    timeout: float | None = None,
) -> AsyncIterator[Backend]:
    """``local()``'s process for ``kind`` ``local`` (entered by :meth:`Backend.ready`, only then); for
    ``processes``, worker processes of this machine (one per CPU, at most ``concurrency``) that build
    their pipeline from ``spec`` and are killed past an item's ``timeout``
    (:mod:`~osmosis_ai.runs.backends.processes`); for ``ray``, a pool of Ray workers building their
    pipeline from ``spec`` (``concurrency``: items in flight over all workers, at most one worker per
    CPU of the cluster). Workers start as this is entered and are gone when it exits. Ray's own
    failures are :class:`~osmosis_ai.runs.backends.ray.RayBackendError` (what failed, how to fix it)."""
    if kind == "processes":
        from osmosis_ai.runs.backends.processes import ItemProcesses

        processes = ItemProcesses(spec, concurrency=concurrency, timeout=timeout)
        starting = asyncio.ensure_future(processes.start())
        try:

            async def started() -> ProcessItem:
                await asyncio.shield(starting)
                return processes

            yield Backend(started, kind)
        finally:
            starting.cancel()
            await asyncio.wait([starting])
            await processes.aclose()
            if not starting.cancelled():
                starting.exception()  # seen: whoever awaited ready() has raised it already
        return
    if kind != "ray":
        async with contextlib.AsyncExitStack() as stack:
            yield Backend(lambda: stack.enter_async_context(local()))
        return
    from osmosis_ai.runs.backends.ray import ray_pool

    if not logging.getLogger("osmosis_ai").isEnabledFor(logging.DEBUG):  # Ray's notes are not the run's
        with contextlib.suppress(ImportError):  # (a missing ray is ray_pool's error, with the fix)
            import ray  # noqa: F401  (its import sets its logger's level; this one comes after)
        logging.getLogger("ray").setLevel(logging.ERROR)
    async with ray_pool(spec, concurrency=concurrency, address=address, wait=False) as pool:

        async def started() -> ProcessItem:
            await pool.ready()
            return pool

        yield Backend(started, kind)
