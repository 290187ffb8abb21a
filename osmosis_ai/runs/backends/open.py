"""Where a run's items go: this process, or a pool of Ray workers.

:func:`open_backend` is given how to open the in-process pipeline and, for Ray, the
:class:`~osmosis_ai.runs.backends.ray.WorkerSpec` its workers build the same pipeline from. It
gives back a :class:`Backend` whose :meth:`~Backend.ready` is the ``process`` to hand the run engine.
Ray and its workers start as the backend is entered, so the run's preflight overlaps their start.
"""

from __future__ import annotations

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
    :func:`~osmosis_ai.runs.engine.run_items`; then :attr:`workers` counts the Ray workers in use."""

    def __init__(self, start: Callable[[], Awaitable[ProcessItem]]) -> None:
        self._start = start
        self._process: ProcessItem | None = None

    async def ready(self) -> ProcessItem:
        """The process, once it can take items: the local pipeline built, or the Ray workers started
        (they start when the backend is entered, so work done before this call overlaps theirs)."""
        if self._process is None:
            self._process = await self._start()
        return self._process

    @property
    def workers(self) -> int:
        """The Ray workers in use now (0 for a local run, or before :meth:`ready`)."""
        return int(getattr(self._process, "workers", 0))

    def note(self) -> str:
        """What the summary line adds: where the items ran (nothing for a local run)."""
        workers = self.workers
        return f"; on {workers} Ray {plural('worker', workers)}" if workers else ""

    def header(self) -> str | None:
        """The header line naming the Ray workers in use (``None`` for a local run)."""
        workers = self.workers
        return f"Backend: Ray, {workers} {plural('worker', workers)}" if workers else None


@contextlib.asynccontextmanager
async def open_backend(
    kind: str,
    local: Callable[[], contextlib.AbstractAsyncContextManager[ProcessItem]],
    *,
    spec: WorkerSpec,
    concurrency: int,
    address: str | None = None,
) -> AsyncIterator[Backend]:
    """``local()``'s process for ``kind`` ``local`` (entered by :meth:`Backend.ready`, only then); for
    ``ray``, a pool of Ray workers building their pipeline from ``spec`` (``concurrency``: items in
    flight over all workers, at most one worker per CPU of the cluster), starting as this is entered.
    The workers are gone when this exits. Ray's own failures are
    :class:`~osmosis_ai.runs.backends.ray.RayBackendError` (what failed, how to fix it)."""
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

        yield Backend(started)
