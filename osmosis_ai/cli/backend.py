"""Where a command's work items run: ``--backend local`` (this process) or ``--backend ray``.

A command gives :func:`run_backend` how to open its in-process pipeline and, for Ray, the :class:`WorkerSpec`
its workers build the same pipeline from (a factory of its own, named ``MODULE:ATTR``, given the
command's plain arguments: :func:`worker_settings`). It gets back a :class:`Backend` whose
``ready()`` is the ``process`` to hand the run engine, and the line that says where the run ran. Ray
and its workers start as the backend is entered, so the command's own preflight overlaps their start. The Ray backend's own error becomes the one
``Error:`` line (what failed, how to fix it).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.evaluation.outcome import plural
from osmosis_ai.runs.engine import ProcessItem

_PLAIN = (str, int, float, bool, type(None))


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


def worker_settings(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """The command's arguments as plain data for its Ray workers (``extra`` overrides)."""

    def plain(value: Any) -> bool:
        if isinstance(value, (list, tuple)):
            return all(plain(v) for v in value)
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        return isinstance(value, _PLAIN)

    return {key: value for key, value in vars(args).items() if plain(value)} | extra


@contextlib.asynccontextmanager
async def run_backend(
    args: argparse.Namespace,
    local: Callable[[], contextlib.AbstractAsyncContextManager[ProcessItem]],
    *,
    factory: str,
    settings: Mapping[str, Any],
    concurrency: int,
) -> AsyncIterator[Backend]:
    """``local()``'s process for ``--backend local`` (entered by :meth:`Backend.ready`, only then); for
    ``--backend ray``, a pool of Ray workers that build their pipeline with ``factory(settings,
    share)`` (``concurrency``: items in flight over all workers, at most one worker per CPU of the
    cluster), starting as this is entered. The workers are gone when this exits."""
    if getattr(args, "backend", "local") != "ray":
        async with contextlib.AsyncExitStack() as stack:
            yield Backend(lambda: stack.enter_async_context(local()))
        return
    from osmosis_ai.runs.backends.ray import RayBackendError, WorkerSpec, ray_pool

    if not logging.getLogger("osmosis_ai").isEnabledFor(logging.DEBUG):  # Ray's notes are not the run's
        with contextlib.suppress(ImportError):  # (a missing ray is ray_pool's error, with the fix)
            import ray  # noqa: F401  (its import sets its logger's level; this one comes after)
        logging.getLogger("ray").setLevel(logging.ERROR)
    spec = WorkerSpec(factory, dict(settings))
    try:
        async with ray_pool(spec, concurrency=concurrency, address=args.ray_address, wait=False) as pool:

            async def started() -> ProcessItem:
                await pool.ready()
                return pool

            yield Backend(started)
    except RayBackendError as exc:
        raise CLIError(str(exc)) from None
