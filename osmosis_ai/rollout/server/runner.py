"""Running a RolloutServer app under uvicorn with a graceful drain while HTTP is still up.

``uvicorn.Server.shutdown`` closes the listening sockets first and only then runs the app's lifespan
shutdown, so a drain done there is invisible to TrainGate. :class:`DrainingServer` drains first:
inits are answered 503 with ``Retry-After`` and ``/health`` reports ``"draining"`` while in-flight
rollouts get their grace period; then uvicorn's normal shutdown runs. A second Ctrl-C (uvicorn's
force exit) cuts the drain short.

:func:`tune_gc` is for an application that owns its process (the ``osmosis serve`` command) to call
before serving; the library never calls it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
from typing import Any

import uvicorn


class DrainingServer(uvicorn.Server):
    """A ``uvicorn.Server`` for an app from ``create_app`` (see the module docstring)."""

    def __init__(self, config: uvicorn.Config, app: Any) -> None:
        super().__init__(config)
        self._lifecycle = app.state.rollout_lifecycle

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        drain = asyncio.ensure_future(self._lifecycle.drain())
        while not drain.done() and not self.force_exit:
            await asyncio.wait({drain}, timeout=0.1)
        await super().shutdown(sockets)


GC_THRESHOLDS = (10_000, 50, 50)


def tune_gc() -> None:
    """Tune the garbage collector of this process for a request server.

    Objects that exist now (modules, the app) are frozen out of collections, and the young generation
    is collected less often: nearly every per-request object dies by reference counting, so the
    default threshold runs collections, full ones included, that find almost nothing. The
    ``tune_gc`` line of ``benchmarks/rollout_server.py`` measures what this buys.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run_app(app: Any, *, host: str, port: int, **options: Any) -> None:
    """``uvicorn.run(app, ...)`` with :class:`DrainingServer`; exit status 3 if start-up fails."""
    server = DrainingServer(uvicorn.Config(app, host=host, port=port, **options), app)
    with contextlib.suppress(
        KeyboardInterrupt
    ):  # uvicorn re-raises the captured Ctrl-C after a clean shutdown
        server.run()
    if not server.started:
        raise SystemExit(3)  # uvicorn's STARTUP_FAILURE, as uvicorn.run does; the reason is already logged
