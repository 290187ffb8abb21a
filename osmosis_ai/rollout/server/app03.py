"""``create_rollout_server``: 0.3's entry point, serving a ``LocalBackend`` over the 0.3 wire on this
package's engine (the executor's slots, queue limit, deadlines and drain; :mod:`.routes03`).

A 0.3 project's ``main.py`` runs unchanged::

    app = create_rollout_server(backend=LocalBackend(workflow=MyWorkflow, grader=MyGrader))
    uvicorn.run(app, host="0.0.0.0", port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")))
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import math
import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from osmosis_ai.rollout.backend.local.backend import LocalBackend
from osmosis_ai.rollout.backend.local.grading import grader_runtime_for
from osmosis_ai.rollout.server.app import LifecycleManager, server_metrics
from osmosis_ai.rollout.server.config import ServerConfig
from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.executor import RolloutExecutor
from osmosis_ai.rollout.server.results03 import Results03
from osmosis_ai.rollout.server.run03 import Runner03
from osmosis_ai.rollout.server.state import AppState, open_state
from osmosis_ai.rollout.server.state_memory import MemoryState
from osmosis_ai.rollout.server.state_redis import RedisState
from osmosis_ai.rollout.server.state_shared import ResultStore
from osmosis_ai.rollout.server.state_sqlite import SqliteState

if TYPE_CHECKING:
    from fastapi import FastAPI

    from osmosis_ai.rollout.server.workers import WorkerSlot

logger = logging.getLogger(__name__)

DEFAULT_RESULT_WAIT_TIMEOUT_SEC = 30.0
DEFAULT_POLLING_LEASE_TIMEOUT_SEC = 120.0
DEFAULT_RESULT_RETENTION_SEC = 900.0


def _check_timings(wait: float, lease: float, retention: float) -> None:
    if not math.isfinite(wait) or wait <= 0:
        raise ValueError(f"result_wait_timeout_sec must be a positive finite number, got {wait!r}")
    if not math.isfinite(lease) or lease <= wait:
        raise ValueError(
            f"polling_lease_timeout_sec must be finite and longer than result_wait_timeout_sec ({wait!r}), got {lease!r}"
        )
    if not math.isfinite(retention) or retention < 0:
        raise ValueError(f"result_retention_sec must be a finite number >= 0, got {retention!r}")


def _configure_default_logging() -> None:
    """INFO to stderr when the process has set up no logging (uvicorn configures only its own loggers)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _with_key(config: ServerConfig | None, api_key: str | None) -> ServerConfig:
    """``config`` (default: the environment's) with ``api_key``."""
    config = config or ServerConfig()
    if api_key is not None:
        if not api_key.strip():
            raise ValueError("api_key must be a non-empty string when given")
        config = dataclasses.replace(config, api_key=api_key)
    return config


def _with_slots(backend: LocalBackend, config: ServerConfig) -> ServerConfig:
    """``config`` with the backend's concurrency limit, when it sets one."""
    if backend.max_concurrent is None:
        return config
    server = config.server.model_copy(update={"max_concurrent_rollouts": backend.max_concurrent})
    return dataclasses.replace(config, server=server)


def default_results_path(backend: LocalBackend) -> str:
    """Where a 0.3 server keeps its rollouts and results when ``ServerConfig.state`` names no other
    place: one SQLite file per workflow class and working directory, under ``$XDG_STATE_HOME``
    (``~/.local/state`` without it), so the same ``main.py`` restarted finds what it admitted."""
    workflow = backend.named
    identity = f"{os.getcwd()}\0{workflow.__module__}.{workflow.__qualname__}"
    digest = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    root = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(root, "osmosis", "rollout-results", f"{workflow.__qualname__}-{digest}.sqlite3")


def _result_store(config: ServerConfig, backend: LocalBackend) -> ResultStore | None:
    """The store of the 0.3 rollouts: ``config.state`` (an SQLite file or a Redis URL), by default
    :func:`default_results_path`; ``":memory:"`` keeps them in this process only (none)."""
    where = config.state
    if where == ":memory:":
        return None
    if where is None:
        where = default_results_path(backend)
        try:
            os.makedirs(os.path.dirname(where), exist_ok=True)
            return SqliteState(
                where,
                record_ttl_seconds=config.server.record_ttl_seconds,
                lease_seconds=config.server.owner_lease_seconds,
            )
        except (OSError, SharedStateUnavailable) as exc:  # nobody asked for this file: serve without it
            logger.warning(
                "0.3 rollouts are kept in this process only (a restart loses them): %s; "
                "name a writable file with ServerConfig(state=...)",
                exc,
            )
            return None
    store = open_state(
        where,
        record_ttl_seconds=config.server.record_ttl_seconds,
        lease_seconds=config.server.owner_lease_seconds,
    )
    assert isinstance(store, (SqliteState, RedisState))  # a location given: never this process's memory
    return store


def create_rollout_server(
    *,
    backend: LocalBackend,
    lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | None = None,
    configure_logging: bool = True,
    result_wait_timeout_sec: float = DEFAULT_RESULT_WAIT_TIMEOUT_SEC,
    polling_lease_timeout_sec: float = DEFAULT_POLLING_LEASE_TIMEOUT_SEC,
    result_retention_sec: float = DEFAULT_RESULT_RETENTION_SEC,
    api_key: str | None = None,
    config: ServerConfig | None = None,
) -> FastAPI:
    """The FastAPI app serving ``backend`` over the 0.3 wire.

    ``lifespan``: the user's own (entered first, left last, so its resources outlive the drain).
    ``api_key``: requests must carry ``Authorization: Bearer <api_key>``. ``result_wait_timeout_sec``:
    the longest a poll waits; ``polling_lease_timeout_sec``: how long a lease lasts unpolled;
    ``result_retention_sec``: how long a finished result stays pollable. ``config`` (this package's
    :class:`ServerConfig`) gives the engine's other knobs — queue limit, deadline, drain; the slots
    are the backend's ``max_concurrent`` when it sets one; its ``state`` is where rollouts and
    results are stored for other processes and restarts (an SQLite file or a ``redis://`` URL;
    default :func:`default_results_path`; ``":memory:"``: this process only).
    """
    if not isinstance(backend, LocalBackend):
        raise TypeError(
            f"create_rollout_server(backend=...) takes a LocalBackend, got {type(backend).__name__}"
        )
    _check_timings(result_wait_timeout_sec, polling_lease_timeout_sec, result_retention_sec)
    try:
        import fastapi  # noqa: F401
    except ImportError as exc:
        from osmosis_ai._lazy import install_hint

        raise ImportError(f"create_rollout_server needs FastAPI; {install_hint(exc.name)}") from exc
    if configure_logging:
        _configure_default_logging()
    return build_app03(
        backend,
        _with_key(config, api_key),
        lifespan=lifespan,
        result_wait_timeout_sec=result_wait_timeout_sec,
        polling_lease_timeout_sec=polling_lease_timeout_sec,
        result_retention_sec=result_retention_sec,
    )


def build_app03(
    backend: LocalBackend,
    config: ServerConfig,
    worker: WorkerSlot | None = None,
    *,
    lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | None = None,
    result_wait_timeout_sec: float = DEFAULT_RESULT_WAIT_TIMEOUT_SEC,
    polling_lease_timeout_sec: float = DEFAULT_POLLING_LEASE_TIMEOUT_SEC,
    result_retention_sec: float = DEFAULT_RESULT_RETENTION_SEC,
) -> FastAPI:
    """The app :func:`create_rollout_server` describes, for ``config`` (its key; its slots unless
    the backend sets them); ``worker`` is its slot when it is one of the processes of ``osmosis serve --workers N``
    (``/health`` then names the worker and adds up all of them)."""
    from fastapi import FastAPI

    from osmosis_ai.rollout.server.routes03 import add_routes03

    config = _with_slots(backend, config)
    state = AppState(settings=config.server, agent_loop_name=backend.named.__name__)
    metrics = server_metrics(config, state, lambda: executor.pending_deliveries)
    executor = RolloutExecutor(None, state, config, MemoryState(), metrics)
    lifecycle = LifecycleManager(config, state, executor, worker)
    results = Results03(
        result_wait_timeout_sec=result_wait_timeout_sec,
        polling_lease_timeout_sec=polling_lease_timeout_sec,
        result_retention_sec=result_retention_sec,
        store=_result_store(config, backend),
    )
    process_id = str(uuid.uuid4())
    grading = grader_runtime_for(backend)
    runner = Runner03(executor, backend, results, process_id, grading)

    @contextlib.asynccontextmanager
    async def serving(app: Any) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if lifespan is not None:
                await stack.enter_async_context(lifespan(app))
            stack.push_async_callback(results.close)  # after the drain, which publishes results
            if grading is not None:  # its workers end after the drain too
                stack.push_async_callback(grading.close)
                await grading.start()
            await results.start()
            await stack.enter_async_context(lifecycle.lifespan(app))
            yield

    app = FastAPI(
        title=f"Osmosis rollout server ({backend.named.__name__})",
        lifespan=serving,
        docs_url="/docs" if config.docs_enabled else None,
        redoc_url="/redoc" if config.docs_enabled else None,
        openapi_url="/openapi.json" if config.docs_enabled else None,
    )
    add_routes03(app, runner, config, process_id, worker)
    app.state.rollout_state = state
    app.state.rollout_executor = executor
    app.state.rollout_lifecycle = lifecycle
    app.state.rollout_results = results
    app.state.rollout_backend = backend  # what `osmosis test -m main:app` runs in-process
    return app
