"""``create_app``: the FastAPI application that serves one ``RolloutAgentLoop`` to TrainGate.

Routes: ``POST /v1/rollout/init`` (auth), ``GET /health``, ``GET /platform/health`` (auth; 404 when the
server has no key), ``GET /metrics`` (Prometheus; when ``ServerConfig.metrics`` allows). The lifespan starts the record janitor, re-sends what an earlier run left in the
outbox, runs ``on_startup``, registers with the Platform when asked to, and on shutdown drains
rollouts (grace period, then ERROR callbacks), runs ``on_shutdown``, and lets go of its event loop's
shared HTTP pools (closed once nothing else in the loop holds them). Every option is a field of :class:`~osmosis_ai.rollout.server.config.ServerConfig`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from osmosis_ai._lazy import install_hint
from osmosis_ai.rollout.server.config import LifecycleHook, ServerConfig, from_keywords
from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.executor import RolloutExecutor
from osmosis_ai.rollout.server.state import AppState, open_state
from osmosis_ai.rollout.server.state_memory import MemoryState
from osmosis_ai.rollout.server.state_shared import HEARTBEATS_PER_LEASE

if TYPE_CHECKING:
    from fastapi import FastAPI

    from osmosis_ai.observe.metrics import ServerMetrics
    from osmosis_ai.rollout.config.settings import RolloutSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.server.registration import RegistrationResult
    from osmosis_ai.rollout.server.workers import WorkerSlot

logger = logging.getLogger(__name__)

SHUTDOWN_CALLBACK_TIMEOUT_SECONDS = 5.0
RELEASE_SETTLE_SECONDS = 1.0  # for the last acknowledged results' claims to be released


class LifecycleManager:
    """Start-up and shutdown of one app (see the module docstring for the order); ``worker`` is its
    slot among the processes of ``serve_agent_loop(workers=N)``."""

    def __init__(
        self,
        config: ServerConfig,
        state: AppState,
        executor: RolloutExecutor,
        worker: WorkerSlot | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self.executor = executor
        self.worker = worker
        self._registration: asyncio.Task[Any] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._gauges: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        from osmosis_ai._http import holding_shared_pools

        async with holding_shared_pools():
            await self._start()
            try:
                yield
            finally:
                try:
                    await self._stop()
                finally:
                    self.executor.deliveries.close()
                    await self.executor.shared.close()

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
            self.config.server.shutdown_grace_seconds, SHUTDOWN_CALLBACK_TIMEOUT_SECONDS
        )
        if finished or ended:
            logger.info(
                "shutdown: %d rollouts finished during the grace period, %d ended with ERROR", finished, ended
            )

    async def _start(self) -> None:
        config = self.config
        self._drain = None
        logger.info(
            "RolloutServer starting: agent loop %r, max_concurrent=%d",
            self.state.agent_loop_name,
            self.state.max_concurrent,
        )
        if config.debug_dir:
            logger.info("per-rollout debug traces go to %s", config.debug_dir)
        self.state.start_cleanup_task()
        self.executor.deliveries.start()
        metrics = self.executor.metrics
        if metrics is not None and metrics.multiprocess:
            self._gauges = asyncio.get_running_loop().create_task(_refresh_gauges(metrics))
        if not isinstance(self.executor.shared, MemoryState) or self.worker is not None:
            failing = await self._beat(warned=False)
            await self.executor.adopt_stored()
            self._heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop(failing))
        if config.on_startup is not None:
            await config.on_startup()
        if config.registers:
            self._registration = asyncio.get_running_loop().create_task(
                register_when_ready(config, self.state.agent_loop_name)
            )

    @property
    def beat_interval(self) -> float:
        """Seconds between heartbeats: a few per lease, and per record TTL, which a running
        rollout's claim must never outlive."""
        return min(self.executor.shared.lease_seconds, self.state.record_ttl) / HEARTBEATS_PER_LEASE

    async def _beat(self, warned: bool) -> bool:
        """Renew this process's liveness and the claims of its unfinished rollouts, and publish its
        figures; whether the shared state failed."""
        if self.worker is not None:
            self.worker.publish(self.state, self.executor)
        try:
            await self.executor.shared.heartbeat(list(self.state.active))
        except SharedStateUnavailable as exc:
            self.executor.shared_error = str(exc)
            if not warned:
                logger.warning("%s; inits answer 503 until it is back", exc)
            return True
        self.executor.shared_error = None
        if warned:
            logger.info("the shared state %s is reachable again", self.executor.shared.where)
        return False

    async def _heartbeat_loop(self, failing: bool) -> None:
        while True:
            await asyncio.sleep(self.beat_interval)
            failing = await self._beat(failing)

    async def _stop(self) -> None:
        for task in (self._registration, self._gauges):
            if task is not None and not task.done():
                task.cancel()  # pointless once we stop; it only awaits, so it ends now
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._registration = self._gauges = None
        await self.drain()
        try:
            if self.config.on_shutdown is not None:
                await self.config.on_shutdown()
        finally:
            await self.state.stop_cleanup_task()
            heartbeat, self._heartbeat = self._heartbeat, None
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            # Nothing should be left after the drain; whatever is reports ERROR within what is left
            # of the same callback budget.
            await self.state.cancel_all(timeout=self.executor.callback_time_left())
            await self.executor.deliveries.stop(self.executor.callback_time_left())
            await self.executor.settle_releases(RELEASE_SETTLE_SECONDS)
            self.executor.close_abandoned()


async def register_when_ready(config: ServerConfig, agent_loop_name: str) -> RegistrationResult:
    """Wait for the server's own ``/health``, register once, and hand the outcome to
    ``config.on_registration`` (default: ``log_registration_result``). The lifespan runs this as a
    task when ``config.registers``."""
    from osmosis_ai.rollout.server.registration import (
        aregister_with_platform,
        log_registration_result,
        wait_until_ready,
    )

    assert config.host is not None and config.port is not None
    if not await wait_until_ready(config.host, config.port, config.server):
        logger.warning("the server did not answer /health in time; registering anyway")
    result = await aregister_with_platform(
        config.host, config.port, agent_loop_name, config.credentials, config.api_key
    )
    (config.on_registration or log_registration_result)(result)
    return result


async def _refresh_gauges(metrics: ServerMetrics) -> None:
    """Keep this worker's gauges current in the shared files: another worker may answer the scrape."""
    from osmosis_ai.observe.metrics import GAUGE_REFRESH_SECONDS

    while True:
        metrics.refresh()
        await asyncio.sleep(GAUGE_REFRESH_SECONDS)


def _metrics_wanted(config: ServerConfig) -> bool:
    """``config.metrics``, where ``None`` means "when prometheus-client is installed"."""
    if config.metrics is None:
        return importlib.util.find_spec("prometheus_client") is not None
    if config.metrics:
        try:
            import prometheus_client  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                f"ServerConfig(metrics=True) needs prometheus-client; {install_hint(exc.name)}"
            ) from exc
    return config.metrics


def server_metrics(config: ServerConfig, state: AppState, pending: Callable[[], int]) -> ServerMetrics | None:
    """The Prometheus figures of one app (either wire) when ``config.metrics`` wants them; its gauges
    read ``state`` and ``pending()`` (the terminal reports not acknowledged yet)."""
    if not _metrics_wanted(config):
        return None
    from osmosis_ai.observe.metrics import Gauges, ServerMetrics

    return ServerMetrics(lambda: Gauges(state.running, state.queued_count, pending(), state.max_concurrent))


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
    config: ServerConfig | None = None,
) -> FastAPI:
    """Build the RolloutServer app for ``agent_loop``, configured by ``config``.

    The other parameters are the keyword form of the same options, mapped onto a
    :class:`ServerConfig` (``server_host``/``server_port`` are its ``host``/``port``;
    ``max_concurrent`` and ``record_ttl_seconds`` replace the environment's
    ``max_concurrent_rollouts`` and ``record_ttl_seconds``; ``settings`` gives its ``server`` and
    ``client``). Give either ``config`` or those, not both (``RolloutValueError``).
    """
    config = from_keywords(
        "create_app",
        config,
        max_concurrent=max_concurrent,
        record_ttl_seconds=record_ttl_seconds,
        settings=settings,
        credentials=credentials,
        server_host=server_host,
        server_port=server_port,
        api_key=api_key,
        debug_dir=debug_dir,
        on_startup=on_startup,
        on_shutdown=on_shutdown,
    )
    return build_app(agent_loop, config)


def build_app(
    agent_loop: RolloutAgentLoop, config: ServerConfig, worker: WorkerSlot | None = None
) -> FastAPI:
    """The app :func:`create_app` describes, for ``config``; ``worker`` is its slot when it is one of
    the processes of ``serve_agent_loop(workers=N)`` (``/health`` then adds up all of them)."""
    try:
        from fastapi import FastAPI

        from osmosis_ai.rollout.server.routes import add_routes
    except ImportError as exc:
        raise ImportError(f"create_app needs FastAPI; {install_hint(exc.name)}") from exc
    name = _agent_name(agent_loop)
    state = AppState(settings=config.server, agent_loop_name=name)
    metrics = server_metrics(config, state, lambda: executor.pending_deliveries)
    shared = open_state(
        config.state,
        record_ttl_seconds=config.server.record_ttl_seconds,
        lease_seconds=config.server.owner_lease_seconds,
    )
    executor = RolloutExecutor(agent_loop, state, config, shared, metrics)
    lifecycle = LifecycleManager(config, state, executor, worker)
    app = FastAPI(
        title=f"Osmosis RolloutServer ({name})",
        description="Remote rollout server for Osmosis agent training",
        lifespan=lifecycle.lifespan,
        docs_url="/docs" if config.docs_enabled else None,
        redoc_url="/redoc" if config.docs_enabled else None,
        openapi_url="/openapi.json" if config.docs_enabled else None,
    )
    add_routes(app, state, executor, config, metrics, worker)
    app.state.rollout_state = state
    app.state.rollout_executor = executor
    app.state.rollout_lifecycle = lifecycle
    return app


# 0.3 defines create_rollout_server and its defaults in a module of this name; they live in app03
# (which builds on this module), so they are resolved on first use.
_AT_THE_0_3_PATH = {
    "create_rollout_server": "osmosis_ai.rollout.server.app03",
    "DEFAULT_POLLING_LEASE_TIMEOUT_SEC": "osmosis_ai.rollout.server.app03",
    "DEFAULT_RESULT_RETENTION_SEC": "osmosis_ai.rollout.server.app03",
    "DEFAULT_RESULT_WAIT_TIMEOUT_SEC": "osmosis_ai.rollout.server.app03",
    "POLLING_LEASE_HEADER": "osmosis_ai.rollout.types.protocol",
}


def __getattr__(name: str) -> Any:
    module = _AT_THE_0_3_PATH.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
