"""Serving an ASGI app (a RolloutServer from ``create_app``) in the running event loop, on a free loopback port.

``osmosis rollout run -m module:agent`` uses this so the agent, its rollout server and the
TrainGate share one process and one event loop: no subprocess, no port juggling, one Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from osmosis_ai._deadline import Deadline
from osmosis_ai._sockets import bind_listener
from osmosis_ai.traingate.errors import TrainGateError

STARTUP_TIMEOUT_S = 15.0


def _server_without_signals(uvicorn: Any, config: Any) -> Any:
    """A uvicorn server that leaves SIGINT/SIGTERM to the caller (the CLI owns Ctrl-C)."""

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return _Server(config)


@contextlib.asynccontextmanager
async def serve_asgi(app: Any, *, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``app`` under uvicorn until the block exits; yield its base URL."""
    import uvicorn

    sock = bind_listener(host)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", backlog=1024, timeout_graceful_shutdown=5
    )
    server = _server_without_signals(uvicorn, config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        deadline = Deadline.after(STARTUP_TIMEOUT_S)
        while not server.started:
            if task.done() or deadline.remaining() == 0:
                raise TrainGateError("the in-process rollout server did not start (see the log above)")
            await asyncio.sleep(0.005)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await task
        sock.close()


@contextlib.asynccontextmanager
async def serve_agent_loop_locally(agent_loop: Any) -> AsyncIterator[str]:
    """Serve ``agent_loop`` through ``create_app`` without a key in this loop; yield its URL.

    No shutdown grace period: when the block exits the run is over, so rollouts still in flight (the
    ones that timed out) are ended at once, with their ERROR callbacks, instead of being waited for.
    """
    from osmosis_ai.rollout.config import get_settings
    from osmosis_ai.rollout.server import ServerConfig, create_app

    no_grace = get_settings().server.model_copy(update={"shutdown_grace_seconds": 0})
    async with serve_asgi(create_app(agent_loop, config=ServerConfig(server=no_grace))) as url:
        yield url
