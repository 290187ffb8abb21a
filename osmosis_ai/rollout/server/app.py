"""``create_app``: the FastAPI application that serves one ``RolloutAgentLoop`` to TrainGate.

Routes: ``POST /v1/rollout/init`` (auth), ``GET /health``, ``GET /platform/health`` (auth; 404 when the
server has no key). The lifespan starts the record janitor, runs ``on_startup``, registers with the
Platform when asked to, and on shutdown drains rollouts (grace period, then ERROR callbacks), runs
``on_shutdown`` and closes the process's shared HTTP pool.

Keyword-only options:

* ``queue_limit``: rollouts allowed to wait for a concurrency slot; beyond it init answers 429 with
  ``Retry-After``. Default: settings ``max_queued_rollouts`` (env
  ``OSMOSIS_ROLLOUT_SERVER_MAX_QUEUED_ROLLOUTS``), unset = unlimited.
* ``shutdown_grace_seconds``: how long shutdown waits for in-flight rollouts before ending them with
  ERROR callbacks. Default: settings ``shutdown_grace_seconds`` (env
  ``OSMOSIS_ROLLOUT_SERVER_SHUTDOWN_GRACE_SECONDS``, default 10 s).
* ``docs_enabled``: expose ``/docs``, ``/redoc`` and ``/openapi.json`` (off by default: they are
  unauthenticated and describe the server to anyone who can reach it).
* ``max_request_bytes``: init bodies above this size get 413 (default 64 MiB).
* ``tools_exclude_none``: leave ``null`` fields out of the init response's tool schemas
  (``"description": null``, ``"enum": null`` are sent by default; strict OpenAI-style consumers
  reject them).
* ``get_tools_in_thread``: accepted for compatibility; a synchronous ``get_tools`` always runs in a
  worker thread (see ``server/agent_tools.py``).
* ``max_concurrent_inits``: init requests handled at once (default 64); the rest wait before their
  body is parsed, which keeps a burst of inits cheap in memory (see ``server/routes.py``). Raise it
  for an ``async def get_tools`` that waits on slow I/O, where it bounds init throughput.
* ``outbox_path``: the SQLite file of unacknowledged terminal callbacks (see
  ``server/outbox.py``). Default: settings ``outbox_path`` (env
  ``OSMOSIS_ROLLOUT_SERVER_OUTBOX_PATH``), unset = in memory. At start-up the server re-sends what
  an earlier run left in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from osmosis_ai._lazy import install_hint
from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.server.executor import RolloutExecutor
from osmosis_ai.rollout.server.state import AppState

if TYPE_CHECKING:
    from fastapi import FastAPI

    from osmosis_ai.rollout.config.settings import RolloutSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

logger = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CONCURRENT_INITS = 64
SHUTDOWN_CALLBACK_TIMEOUT_SECONDS = 5.0

LifecycleHook = Callable[[], Awaitable[Any]]


def _non_negative(value: Any, what: str) -> Any:
    if value is not None and value < 0:
        raise RolloutValueError(f"{what} must be >= 0, got {value!r}")
    return value


class LifecycleManager:
    """Start-up and shutdown of one app (see the module docstring for the order)."""

    def __init__(
        self,
        agent_loop: RolloutAgentLoop,
        state: AppState,
        executor: RolloutExecutor,
        *,
        debug_dir: str | None,
        credentials: Any,
        server_host: str | None,
        server_port: int | None,
        api_key: str | None,
        on_startup: LifecycleHook | None,
        on_shutdown: LifecycleHook | None,
        shutdown_grace_seconds: float,
        on_registration: Callable[[Any], object] | None = None,
    ) -> None:
        self.agent_loop = agent_loop
        self.state = state
        self.executor = executor
        self.debug_dir = debug_dir
        self.credentials = credentials
        self.server_host = server_host
        self.server_port = server_port
        self.api_key = api_key
        self.on_startup = on_startup
        self.on_shutdown = on_shutdown
        self.shutdown_grace_seconds = shutdown_grace_seconds
        self.on_registration = on_registration
        self._registration: asyncio.Task[Any] | None = None
        self._drain: asyncio.Future[None] | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        await self._start()
        try:
            yield
        finally:
            try:
                await self._stop()
            finally:
                self.executor.outbox.close()

    async def drain(self) -> None:
        """Stop accepting rollouts, let in-flight ones finish for the grace period, end the rest with ERROR.

        Idempotent: ``serve_agent_loop``'s server calls it while HTTP is still up (so late inits get
        503 and ``/health`` says "draining"), the lifespan shutdown calls it again.
        """
        if self._drain is None:
            self._drain = asyncio.ensure_future(self._drain_rollouts())
        await asyncio.shield(self._drain)

    async def _drain_rollouts(self) -> None:
        finished, ended = await self.executor.drain(
            self.shutdown_grace_seconds, SHUTDOWN_CALLBACK_TIMEOUT_SECONDS
        )
        if finished or ended:
            logger.info(
                "shutdown: %d rollouts finished during the grace period, %d ended with ERROR", finished, ended
            )

    async def _start(self) -> None:
        self._drain = None
        logger.info(
            "RolloutServer starting: agent loop %r, max_concurrent=%d",
            self.state.agent_loop_name,
            self.state.max_concurrent,
        )
        if self.debug_dir:
            logger.info("per-rollout debug traces go to %s", self.debug_dir)
        self.state.start_cleanup_task()
        executor = self.executor
        dropped = executor.outbox.prune(self.state.record_ttl)
        if dropped:
            logger.warning("outbox: dropped %d callbacks older than the record TTL", dropped)
        resent = executor.resend_stored()
        if resent:
            logger.info("outbox: re-sending %d terminal callbacks left by an earlier run", resent)
        if self.on_startup is not None:
            await self.on_startup()
        if self.credentials is not None and self.server_host is not None and self.server_port is not None:
            from osmosis_ai.rollout.server.registration import register_when_ready

            self._registration = asyncio.get_running_loop().create_task(
                register_when_ready(
                    host=self.server_host,
                    port=self.server_port,
                    agent_loop_name=self.state.agent_loop_name,
                    credentials=self.credentials,
                    api_key=self.api_key,
                    settings=self.state.settings,
                    on_result=self.on_registration,
                )
            )

    async def _stop(self) -> None:
        registration, self._registration = self._registration, None
        if registration is not None and not registration.done():
            registration.cancel()  # pointless once we stop; it only awaits async I/O, so it ends now
            with contextlib.suppress(asyncio.CancelledError):
                await registration
        await self.drain()
        try:
            if self.on_shutdown is not None:
                await self.on_shutdown()
        finally:
            await self.state.stop_cleanup_task()
            # Nothing should be left after the drain; whatever is reports ERROR within what is left
            # of the same callback budget.
            await self.state.cancel_all(timeout=self.executor.callback_time_left())
            await self.executor.stop_deliveries()
            self.executor.close_abandoned()
            await _close_shared_transport()


async def _close_shared_transport() -> None:
    try:
        from osmosis_ai._http import aclose_shared_transport
    except ImportError:  # pragma: no cover - the client module is part of the package
        return
    await aclose_shared_transport()


def _agent_name(agent_loop: RolloutAgentLoop) -> str:
    name = getattr(agent_loop, "name", None)
    return name if isinstance(name, str) and name else type(agent_loop).__name__


def create_app(
    agent_loop: RolloutAgentLoop,
    max_concurrent: int | None = None,
    record_ttl_seconds: float | None = None,
    settings: RolloutSettings | None = None,
    credentials: Any = None,
    server_host: str | None = None,
    server_port: int | None = None,
    api_key: str | None = None,
    debug_dir: str | None = None,
    on_startup: LifecycleHook | None = None,
    on_shutdown: LifecycleHook | None = None,
    *,
    queue_limit: int | None = None,
    shutdown_grace_seconds: float | None = None,
    docs_enabled: bool = False,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    get_tools_in_thread: bool = False,
    tools_exclude_none: bool = False,
    on_registration: Callable[[Any], object] | None = None,
    outbox_path: str | None = None,
    max_concurrent_inits: int = DEFAULT_MAX_CONCURRENT_INITS,
) -> FastAPI:
    """Build the RolloutServer app for ``agent_loop``.

    Args:
        agent_loop: the agent to serve.
        max_concurrent: rollouts running at once (default: settings ``max_concurrent_rollouts``).
        record_ttl_seconds: how long finished rollouts are remembered for duplicate inits.
        settings: rollout settings (default: ``get_settings()``); client settings apply to callbacks.
        credentials: Platform credentials (an object with ``access_token``); with ``server_host`` and
            ``server_port`` the server registers itself with the Platform once it is up, and hands the
            ``RegistrationResult`` to ``on_registration`` (default: it is logged).
        api_key: the key TrainGate must present; ``None`` disables auth (``/platform/health`` -> 404).
        debug_dir: directory for per-rollout JSONL traces (used as is).
        on_startup, on_shutdown: zero-argument async callables run in the lifespan.
        queue_limit, shutdown_grace_seconds, docs_enabled, max_request_bytes, get_tools_in_thread,
            tools_exclude_none, outbox_path, max_concurrent_inits: see the module docstring.
    """
    try:
        from fastapi import FastAPI

        from osmosis_ai.rollout.server.routes import add_routes
    except ImportError as exc:
        raise ImportError(f"create_app needs FastAPI; {install_hint(exc.name)}") from exc
    if settings is None:
        from osmosis_ai.rollout.config.settings import get_settings

        settings = get_settings()
    if queue_limit is None:
        queue_limit = settings.server.max_queued_rollouts
    if shutdown_grace_seconds is None:
        shutdown_grace_seconds = settings.server.shutdown_grace_seconds
    _non_negative(queue_limit, "queue_limit")
    grace = _non_negative(shutdown_grace_seconds, "shutdown_grace_seconds")
    if max_request_bytes <= 0:
        raise RolloutValueError(f"max_request_bytes must be > 0, got {max_request_bytes!r}")
    if max_concurrent_inits <= 0:
        raise RolloutValueError(f"max_concurrent_inits must be > 0, got {max_concurrent_inits!r}")

    from osmosis_ai.rollout.server.outbox import Outbox

    name = _agent_name(agent_loop)
    outbox = Outbox(outbox_path if outbox_path is not None else settings.server.outbox_path)
    state = AppState(max_concurrent, record_ttl_seconds, settings=settings.server, agent_loop_name=name)
    executor = RolloutExecutor(
        agent_loop,
        state,
        settings=settings,
        debug_dir=debug_dir,
        queue_limit=queue_limit,
        tools_exclude_none=tools_exclude_none,
        outbox=outbox,
    )
    lifecycle = LifecycleManager(
        agent_loop,
        state,
        executor,
        debug_dir=debug_dir,
        credentials=credentials,
        server_host=server_host,
        server_port=server_port,
        api_key=api_key,
        on_startup=on_startup,
        on_shutdown=on_shutdown,
        shutdown_grace_seconds=grace,
        on_registration=on_registration,
    )
    app = FastAPI(
        title=f"Osmosis RolloutServer ({name})",
        description="Remote rollout server for Osmosis agent training",
        lifespan=lifecycle.lifespan,
        docs_url="/docs" if docs_enabled else None,
        redoc_url="/redoc" if docs_enabled else None,
        openapi_url="/openapi.json" if docs_enabled else None,
    )
    add_routes(
        app,
        state,
        executor,
        api_key=api_key,
        max_body_bytes=max_request_bytes,
        max_concurrent_inits=max_concurrent_inits,
    )
    app.state.rollout_state = state
    app.state.rollout_executor = executor
    app.state.rollout_lifecycle = lifecycle
    return app
