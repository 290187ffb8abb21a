"""``--backend local|ray`` for the commands that still name a Ray worker factory of their own: their
arguments as plain settings (:func:`worker_settings`) and :func:`run_backend` over the library's
:func:`~osmosis_ai.runs.backends.open.open_backend`."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from osmosis_ai.runs.backends.open import Backend, open_backend
from osmosis_ai.runs.engine import ProcessItem

_PLAIN = (str, int, float, bool, type(None))


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
    """:func:`~osmosis_ai.runs.backends.open.open_backend` as ``--backend``/``--ray-address`` say, its
    Ray workers building their pipeline with ``factory(settings, share)``."""
    from osmosis_ai.runs.backends.ray import WorkerSpec

    spec = WorkerSpec(factory, dict(settings))
    kind = getattr(args, "backend", "local")
    async with open_backend(
        kind, local, spec=spec, concurrency=concurrency, address=getattr(args, "ray_address", None)
    ) as backend:
        yield backend
