"""``serve_agent_loop``: a RolloutAgentLoop validated, bound, built from one ``ServerConfig`` and served
under uvicorn until interrupted; or a 0.3 ``LocalBackend`` (a workflow and its grader) served the same
way over the 0.3 wire (:mod:`.app03`), where validation and the Platform registration do not apply
and the rollouts and results live in the config's ``state`` (for workers, the SQLite file beside the
outbox), so a poll or a cancel on any worker finds the rollout.

It prints nothing. Once the port is bound and the app built, ``on_started`` receives a
:class:`ServeStarted`: everything a start-up report shows (``osmosis serve`` draws its panel from
it); without ``on_started`` the start-up is logged. The Platform's answer to the registration goes to
the config's ``on_registration``.

* ``local_debug`` turns authentication and registration off, and binds ``127.0.0.1`` unless a host is
  given: a server without a key is not exposed on every interface. Otherwise a server key is
  generated unless the config has one, and registration needs Platform credentials (the config's,
  else the environment's token or the login ``osmosis login`` stored) unless ``skip_register``.
* the port is bound before ``on_started`` runs, so a busy port is a :class:`ServeError`, not a
  report followed by uvicorn's error.
* the outbox of unacknowledged terminal callbacks is a file by default (:func:`default_outbox_path`:
  ``$XDG_STATE_HOME/osmosis/rollout-outbox/port-<port>.sqlite3``, ``~/.local/state`` without
  ``XDG_STATE_HOME``), so a restarted server re-sends what a killed one left; the config's
  ``server.outbox_path`` (``$OSMOSIS_ROLLOUT_SERVER_OUTBOX_PATH``) chooses another, ``:memory:``
  none. It is opened once before serving, so a bad path is an error before anything starts; the
  files that workers of an earlier run left beside it and this run has no index for are emptied
  into it then, so fewer ``workers`` than last time still re-sends everything.
* ``reload=True`` gives uvicorn an import string: each reloaded worker rebuilds the app from the
  agent's module (:func:`reloadable_app`), its config travelling in ``OSMOSIS_SERVE_RELOAD_CONFIG``,
  which the worker removes from its environment as soon as it has read it, so the agent's
  subprocesses never see the server key. The registration runs once, from this process. It is a
  development mode: plain ``uvicorn.run``, without :mod:`~osmosis_ai.rollout.server.runner`'s
  drain while serving; ``on_startup``/``on_shutdown`` cannot travel to the worker and are refused.
* ``workers=N`` (N > 1) serves the port from N processes that share the dedupe state
  (:mod:`~osmosis_ai.rollout.server.workers`): an SQLite file beside the outbox unless the config's
  ``state`` names one (``redis://...`` for replicas on several hosts). The agent is re-created in
  each worker from its module, as for ``reload`` (which it excludes); ``on_worker_start`` (a
  picklable zero-argument callable) runs first in each worker, e.g. to configure logging.
* uvicorn runs with uvloop and httptools when installed, its access log off unless asked for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from osmosis_ai._lazy import install_hint, lazy_exports
from osmosis_ai._sync import run_sync
from osmosis_ai.rollout.server.errors import ServeError

if TYPE_CHECKING:
    from fastapi import FastAPI
    from pydantic import BaseModel

    from osmosis_ai.rollout.backend.local.backend import LocalBackend
    from osmosis_ai.rollout.config.settings import RolloutSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.server.config import ServerConfig
    from osmosis_ai.rollout.server.workers import WorkerSlot
    from osmosis_ai.rollout.validator import ValidationResult

logger = logging.getLogger(__name__)

DEFAULT_PORT = 9000
DEFAULT_HOST = "0.0.0.0"
LOCAL_HOST = "127.0.0.1"
RELOAD_CONFIG_ENV = "OSMOSIS_SERVE_RELOAD_CONFIG"
_GRACEFUL_HTTP_SHUTDOWN_SECONDS = 5


@dataclass(frozen=True)
class ServeStarted:
    """What ``serve_agent_loop`` is about to serve: the content of a start-up report.

    ``public_host`` is the address registered for a wildcard bind (``public_host_error`` says why
    it could not be detected); ``api_key`` is ``None`` in local debug mode; ``outbox`` is a path or
    ``":memory:"``; ``debug_dir`` is this session's trace directory; ``validation`` is ``None`` when
    validation was skipped (always for the 0.3 wire); ``wire`` is the protocol served, ``"0.2"`` or
    ``"0.3"`` (a ``LocalBackend``, which is never registered).
    """

    agent_loop_name: str
    host: str
    port: int
    api_key: str | None
    api_key_generated: bool
    registers: bool
    local_debug: bool
    outbox: str
    debug_dir: str | None = None
    public_host: str | None = None
    public_host_error: str | None = None
    reload: bool = False
    validation: ValidationResult | None = None
    workers: int = 1
    state: str | None = None  # the state shared by processes (0.2: None = this process only; 0.3: its file)
    wire: str = "0.2"

    def __repr__(self) -> str:
        key = None if self.api_key is None else "***"
        return f"ServeStarted(agent_loop_name={self.agent_loop_name!r}, host={self.host!r}, port={self.port}, api_key={key})"


def serve_agent_loop(
    agent_loop: RolloutAgentLoop | LocalBackend,
    *,
    host: str | None = None,
    port: int | None = None,
    validate: bool = True,
    log_level: str = "info",
    reload: bool = False,
    settings: RolloutSettings | None = None,
    skip_register: bool = False,
    api_key: str | None = None,
    local_debug: bool = False,
    debug_dir: str | None = None,
    config: ServerConfig | None = None,
    access_log: bool = False,
    on_started: Callable[[ServeStarted], object] | None = None,
    workers: int = 1,
    on_worker_start: Callable[[], object] | None = None,
) -> None:
    """Serve ``agent_loop`` until interrupted (blocks in uvicorn); see the module docstring. A
    ``LocalBackend`` is served over the 0.3 wire (:func:`~osmosis_ai.rollout.server.app03.build_app03`),
    without validation or registration.

    ``host``, ``port`` (default 9000), ``settings``, ``api_key`` and ``debug_dir`` are the keyword
    form of the config's fields; give either ``config`` or those (``RolloutValueError``).
    ``log_level`` and ``access_log`` are uvicorn's. Raises :class:`ServeError` (port busy, outbox or
    trace directory unusable, no Platform credentials; its :class:`ServerStartError` when the app's
    start-up fails), ``AgentLoopValidationError`` (``validate``) and ``ImportError`` without the
    server extra.
    """
    from osmosis_ai.rollout.server.config import from_keywords

    _require_server_extra()
    config = from_keywords(
        "serve_agent_loop",
        config,
        host=host,
        port=port,
        settings=settings,
        api_key=api_key,
        debug_dir=debug_dir,
    )
    if workers < 1:
        raise ServeError(f"workers must be at least 1, got {workers}")
    if reload and workers > 1:
        raise ServeError("reload and workers cannot be combined: reload is for development, serve with one")
    if (reload or workers > 1) and (config.on_startup is not None or config.on_shutdown is not None):
        raise ServeError(
            f"{'reload=True' if reload else 'workers > 1'} builds the app in fresh processes, where "
            "on_startup and on_shutdown cannot follow; build the app in your module"
        )
    config, started, sock = _prepare(
        agent_loop, config, validate, skip_register, local_debug, reload, workers
    )
    options = _uvicorn_options(log_level, access_log)
    if workers > 1:
        portable = _portable(agent_loop, config)  # before anything is reported: the agent must be importable
    (on_started or _log_started)(started)
    if reload:
        sock.close()  # checked; uvicorn's reloader binds it itself
        _run_with_reload(agent_loop, config, started.agent_loop_name, options)
        return
    if workers > 1:
        _serve_workers(portable, config, sock, workers, started.agent_loop_name, options, on_worker_start)
        return
    _serve_app(agent_loop, config, sock, options)


def _is_backend(target: object) -> bool:
    """Whether ``target`` is a 0.3 ``LocalBackend`` (served over the 0.3 wire), not a 0.2 agent loop."""
    from osmosis_ai.rollout.backend.local.backend import LocalBackend

    return isinstance(target, LocalBackend)


def _built(
    target: RolloutAgentLoop | LocalBackend, config: ServerConfig, worker: WorkerSlot | None = None
) -> FastAPI:
    """The app serving ``target``: the 0.2 wire for an agent loop, the 0.3 wire for a ``LocalBackend``."""
    from osmosis_ai.rollout.backend.local.backend import LocalBackend

    if isinstance(target, LocalBackend):
        from osmosis_ai.rollout.server.app03 import build_app03

        return build_app03(target, config, worker)
    from osmosis_ai.rollout.server.app import build_app

    return build_app(target, config, worker)


def _serve_app(
    agent_loop: RolloutAgentLoop | LocalBackend,
    config: ServerConfig,
    sock: socket.socket,
    options: dict[str, Any],
    worker: WorkerSlot | None = None,
) -> None:
    """The app built from ``config`` and served on ``sock`` until it stops (one server, or the worker
    ``worker``)."""
    from osmosis_ai.rollout.server.runner import run_app

    app = _built(agent_loop, config, worker)
    assert config.host is not None and config.port is not None
    run_app(
        app,
        host=config.host,
        port=config.port,
        sock=sock,
        header_timeout_seconds=config.server.header_timeout_seconds,
        max_head_bytes=config.server.max_head_bytes,
        max_headers=config.server.max_headers,
        **options,
    )


def _prepare(
    agent_loop: RolloutAgentLoop | LocalBackend,
    config: ServerConfig,
    validate: bool,
    skip_register: bool,
    local_debug: bool,
    reload: bool,
    workers: int = 1,
) -> tuple[ServerConfig, ServeStarted, socket.socket]:
    """The config to serve, what ``on_started`` is told, and the bound socket (in the order a failure
    is reported: credentials, validation, outbox, port, trace directory)."""
    from osmosis_ai.rollout.server.api_key import check_api_key, generate_api_key
    from osmosis_ai.rollout.server.registration import get_report_host, is_wildcard_host, load_credentials

    if local_debug and config.api_key is not None:
        raise ServeError("an API key cannot be combined with local debug mode, which disables authentication")
    if config.api_key is not None:
        try:
            check_api_key(config.api_key)
        except ValueError as exc:
            raise ServeError(str(exc)) from None
    wire03 = _is_backend(agent_loop)
    registers = not (skip_register or local_debug or wire03)  # a 0.3 controller is given the URL
    host = config.host if config.host is not None else (LOCAL_HOST if local_debug else DEFAULT_HOST)
    port = config.port if config.port is not None else DEFAULT_PORT
    credentials = None
    if registers:
        credentials = config.credentials if config.credentials is not None else load_credentials()
        if credentials is None:
            raise ServeError(
                "registering with the Osmosis Platform needs a login: run 'osmosis login' "
                "('osmosis login --device' on a machine without a browser) or set OSMOSIS_TOKEN; "
                "or skip registration (--skip-register, skip_register=True: API-key auth, no registration) "
                "or serve locally (--local, local_debug=True: no auth, loopback)"
            )
    validation = _validated(agent_loop) if validate and not wire03 else None
    key = None if local_debug else (config.api_key or generate_api_key())
    sock = _bind(host, port)  # before the outbox: a server that cannot listen leaves no file behind
    try:
        outbox = _checked_outbox(config.server.outbox_path or default_outbox_path(port), workers)
        state = _checked_state(config.state, outbox, workers)
        session_dir = _session_debug_dir(config.debug_dir)
    except BaseException:
        sock.close()
        raise
    public_host = public_host_error = None
    if registers and is_wildcard_host(host):  # detected once, reused by the registration
        try:
            public_host = get_report_host(host)
        except Exception as exc:
            public_host_error = str(exc) or type(exc).__name__
    served = dataclasses.replace(
        config,
        server=config.server.model_copy(update={"outbox_path": outbox}),
        api_key=key,
        debug_dir=session_dir,
        host=host,
        port=port,
        credentials=credentials,
        state=state,
    )
    started = ServeStarted(
        agent_loop_name=_target_name(agent_loop),
        host=host,
        port=port,
        api_key=key,
        api_key_generated=key is not None and config.api_key is None,
        registers=registers,
        local_debug=local_debug,
        outbox=outbox,
        debug_dir=session_dir,
        public_host=public_host,
        public_host_error=public_host_error,
        reload=reload,
        validation=validation,
        workers=workers,
        state=_shown_state(state) if state is not None else _results_path(agent_loop),
        wire="0.3" if wire03 else "0.2",
    )
    return served, started, sock


def _results_path(target: RolloutAgentLoop | LocalBackend) -> str | None:
    """Where a ``LocalBackend`` served alone keeps its rollouts by default (``None`` for 0.2: nothing)."""
    from osmosis_ai.rollout.backend.local.backend import LocalBackend

    if not isinstance(target, LocalBackend):
        return None
    from osmosis_ai.rollout.server.app03 import default_results_path

    return default_results_path(target)


def _target_name(target: RolloutAgentLoop | LocalBackend) -> str:
    from osmosis_ai.rollout.backend.local.backend import LocalBackend

    if isinstance(target, LocalBackend):
        return target.workflow_cls.__name__
    return str(getattr(target, "name", type(target).__name__))


def _validated(agent_loop: Any) -> ValidationResult:
    from osmosis_ai.rollout.validator import validate_agent_loop

    result = validate_agent_loop(agent_loop)
    result.raise_if_invalid()
    return result


def _log_started(started: ServeStarted) -> None:
    """What ``serve_agent_loop`` does without ``on_started``: the start-up as log records."""
    logger.info(
        "RolloutServer for %r listening on http://%s:%d (outbox: %s)",
        started.agent_loop_name,
        started.host,
        started.port,
        started.outbox,
    )
    if started.api_key_generated:
        # The only way the key reaches a caller that did not choose it and asked for no report.
        logger.warning(
            "generated the server API key %s (choose one with api_key=, or receive it with on_started=)",
            started.api_key,
        )


def _require_server_extra() -> None:
    for module in ("fastapi", "uvicorn"):
        if find_spec(module) is None:
            raise ImportError(f"serving an agent loop needs {module}; {install_hint(module)}")


def _uvicorn_options(log_level: str, access_log: bool) -> dict[str, Any]:
    return {
        "log_level": log_level,
        "access_log": access_log,
        "loop": "uvloop" if find_spec("uvloop") else "auto",
        "http": "httptools" if find_spec("httptools") else "auto",
        "timeout_graceful_shutdown": _GRACEFUL_HTTP_SHUTDOWN_SECONDS,
    }


def default_outbox_path(port: int) -> str:
    """Where ``serve_agent_loop`` keeps its outbox when none is configured (one file per port)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "osmosis", "rollout-outbox", f"port-{port}.sqlite3")


def _checked_outbox(path: str, workers: int) -> str:
    """``path``, opened once; with the callbacks that workers this run does not have left beside it
    moved in, for worker 0 (or the one server) to send."""
    if path == ":memory:":
        return path
    import sqlite3

    from osmosis_ai.rollout.server.outbox import Outbox
    from osmosis_ai.rollout.server.workers import adopt_left_outboxes

    try:
        Outbox(path).close()
        adopt_left_outboxes(path, workers)
    except (OSError, sqlite3.Error) as exc:
        raise ServeError(
            f"cannot open the outbox {path}: {exc}; choose another file (--outbox, "
            "OSMOSIS_ROLLOUT_SERVER_OUTBOX_PATH), or ':memory:' to keep undelivered callbacks in memory only"
        ) from None
    return path


def _checked_state(state: str | None, outbox: str, workers: int) -> str | None:
    """The dedupe state to share: the one given, checked, or for workers an SQLite file beside the outbox."""
    from osmosis_ai.rollout.server.errors import SharedStateUnavailable
    from osmosis_ai.rollout.server.state_redis import REDIS_SCHEMES
    from osmosis_ai.rollout.server.state_sqlite import SqliteState
    from osmosis_ai.rollout.server.workers import state_beside

    if state is None and workers == 1:
        return None
    if state == ":memory:" and workers > 1:
        raise ServeError(
            "the state of several workers must be a file or a Redis URL: ':memory:' is one process's"
        )
    if state is not None and state.startswith(REDIS_SCHEMES):
        if find_spec("redis") is None:
            raise ServeError(f"a Redis state needs the redis package; {install_hint('redis')}")
        return state
    if state is None:
        if outbox == ":memory:":
            import tempfile

            state = os.path.join(tempfile.mkdtemp(prefix="osmosis-serve-state-"), "state.sqlite3")
        else:
            state = state_beside(outbox)
            os.makedirs(os.path.dirname(state) or ".", exist_ok=True)  # the outbox's own directory
    try:
        checked = SqliteState(state)
    except SharedStateUnavailable as exc:
        raise ServeError(
            f"{exc}; choose another file with --state, or a Redis URL (redis://HOST:PORT/DB)"
        ) from None
    run_sync(checked.close())
    return state


def _shown_state(state: str) -> str:
    from osmosis_ai.rollout.server.state_redis import REDIS_SCHEMES, redis_location

    return redis_location(state) if state.startswith(REDIS_SCHEMES) else state


def _bind(host: str, port: int) -> socket.socket:
    """The listening address, bound now: a busy port is an error before anything is reported."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = (
            "another process is using it; pick another with --port" if exc.errno == errno.EADDRINUSE else ""
        )
        raise ServeError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}{'; ' + hint if hint else ''}"
        ) from None
    sock.set_inheritable(True)
    return sock


def _session_debug_dir(debug_dir: str | None) -> str | None:
    if not debug_dir:
        return None
    session = os.path.join(debug_dir, str(int(time.time())))
    try:
        os.makedirs(session, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"cannot create the debug log directory {session!r}: {exc}") from exc
    return session


# -- reload -----------------------------------------------------------------------------------------------


def _agent_spec(agent_loop: RolloutAgentLoop | LocalBackend) -> str | dict[str, Any]:
    """What re-creates ``agent_loop`` in a fresh process (needed by ``reload`` and workers): its
    ``module:attribute``; for a ``LocalBackend``, its classes' and its configs' (a config travels
    as its class and its JSON value); for a 0.3 pair served on 0.2's wire, the names it was given."""
    from osmosis_ai.rollout.backend.local.backend import LocalBackend
    from osmosis_ai.rollout.bridge.loop_backend import AgentLoopBackend
    from osmosis_ai.rollout.bridge.workflow_loop import WorkflowAgentLoop

    if isinstance(agent_loop, AgentLoopBackend):  # a 0.2 agent loop on 0.3's wire
        return {"loop": _spec_of(agent_loop.agent_loop)}
    if isinstance(agent_loop, WorkflowAgentLoop):  # a 0.3 pair on 0.2's wire, named as it was given
        try:
            pair, grader = agent_loop.reference()
        except ValueError as exc:
            raise ServeError(str(exc)) from None
        return {"pair": pair, "grader": grader}
    if isinstance(agent_loop, LocalBackend):
        return {
            "workflow": _spec_of(agent_loop.workflow_cls),
            "grader": None if agent_loop.grader_cls is None else _spec_of(agent_loop.grader_cls),
            "workflow_config": _config_value(agent_loop.workflow_config),
            "grader_config": _config_value(agent_loop.grader_config),
        }
    return _spec_of(agent_loop)


def _spec_of(value: object) -> str:
    """``module:attribute`` naming ``value``: a class by its name; an object by the attribute of its
    class's module holding it, else its class (re-created without arguments)."""
    cls = value if isinstance(value, type) else type(value)
    module = sys.modules.get(cls.__module__)
    if module is None or cls.__module__ == "__main__":
        raise ServeError(
            f"reload and workers re-create the server in fresh processes: {cls.__qualname__} must live "
            "in an importable module (not __main__); run 'osmosis serve -m module:attribute'"
        )
    if not isinstance(value, type):
        for attribute, candidate in vars(module).items():
            if candidate is value:
                return f"{cls.__module__}:{attribute}"
    return f"{cls.__module__}:{cls.__qualname__}"


def _config_value(config: BaseModel | None) -> dict[str, Any] | None:
    if config is None:
        return None
    try:
        value = config.model_dump(mode="json")
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise ServeError(
            f"reload and workers re-create the server in fresh processes, where its "
            f"{type(config).__name__} travels as JSON: {exc}"
        ) from None
    return {"class": _spec_of(type(config)), "value": value}


_RELOADED_FIELDS = ("api_key", "debug_dir", "host", "port", "docs_enabled", "max_request_bytes",
                    "max_concurrent_inits", "tools_exclude_none", "state")  # fmt: skip


def _portable(agent_loop: RolloutAgentLoop | LocalBackend, config: ServerConfig) -> dict[str, Any]:
    """What a fresh process needs to rebuild the app (JSON-able): the agent's spec and the config."""
    return {
        "agent": _agent_spec(agent_loop),
        "path": os.getcwd(),
        "config": {field: getattr(config, field) for field in _RELOADED_FIELDS},
        "server": config.server.model_dump(),
        "client": config.client.model_dump(),
    }


def _rebuilt(portable: dict[str, Any]) -> tuple[RolloutAgentLoop | LocalBackend, ServerConfig]:
    """The agent loop and config :func:`_portable` described, in this process."""
    from osmosis_ai.rollout.config.settings import RolloutClientSettings, RolloutServerSettings
    from osmosis_ai.rollout.server.config import ServerConfig

    if portable["path"] not in sys.path:
        sys.path.insert(0, portable["path"])
    config = ServerConfig(
        server=RolloutServerSettings.model_construct(**portable["server"]),
        client=RolloutClientSettings.model_construct(**portable["client"]),
        **portable["config"],
    )
    return _load_agent(portable["agent"]), config


def _serve_workers(
    portable: dict[str, Any],
    config: ServerConfig,
    sock: socket.socket,
    workers: int,
    name: str,
    options: dict[str, Any],
    on_worker_start: Callable[[], object] | None,
) -> None:
    import functools

    from osmosis_ai.rollout.server.app import SHUTDOWN_CALLBACK_TIMEOUT_SECONDS
    from osmosis_ai.rollout.server.state_redis import REDIS_SCHEMES
    from osmosis_ai.rollout.server.state_sqlite import SqliteState
    from osmosis_ai.rollout.server.workers import Supervisor

    if config.registers:
        _register_in_background(config, name)
    host_state = None
    if config.state is not None and not config.state.startswith(REDIS_SCHEMES):
        host_state = SqliteState(config.state)
    stop_seconds = (
        config.server.shutdown_grace_seconds
        + SHUTDOWN_CALLBACK_TIMEOUT_SECONDS
        + _GRACEFUL_HTTP_SHUTDOWN_SECONDS
    )
    target = functools.partial(_serve_worker, portable, workers, options, on_worker_start)
    supervisor = Supervisor(target, sock, workers, stop_seconds, host_state)
    try:
        supervisor.run()
    finally:
        sock.close()
        if host_state is not None:
            run_sync(host_state.close())
    if supervisor.stopped_by == signal.SIGTERM:
        # As uvicorn ends one server: a stop request is re-raised once drained, so the process's
        # status says it was stopped (143 in a shell) whatever the number of workers.
        signal.raise_signal(signal.SIGTERM)


def _serve_worker(
    portable: dict[str, Any],
    workers: int,
    options: dict[str, Any],
    on_worker_start: Callable[[], object] | None,
    sock: socket.socket,
    index: int,
    figures: Any,
) -> None:
    """One worker process of :func:`_serve_workers`: the app rebuilt and served on the shared socket."""
    from osmosis_ai.rollout.server.workers import WorkerSlot, worker_outbox

    if on_worker_start is not None:
        on_worker_start()
    agent_loop, config = _rebuilt(portable)
    outbox = worker_outbox(config.server.outbox_path or ":memory:", index)
    config = dataclasses.replace(config, server=config.server.model_copy(update={"outbox_path": outbox}))
    _serve_app(agent_loop, config, sock, options, WorkerSlot(figures, index, workers))


def _run_with_reload(
    agent_loop: RolloutAgentLoop | LocalBackend, config: ServerConfig, name: str, options: dict[str, Any]
) -> None:
    import uvicorn

    reloaded = _portable(agent_loop, config)
    # The reloaded worker is a child process: it inherits this variable, nothing is written to disk.
    os.environ[RELOAD_CONFIG_ENV] = json.dumps(reloaded)
    if config.registers:
        _register_in_background(config, name)
    assert config.host is not None and config.port is not None
    uvicorn.run(
        "osmosis_ai.rollout.server.serve:reloadable_app",
        factory=True,
        reload=True,
        reload_dirs=[os.getcwd()],
        host=config.host,
        port=config.port,
        **options,
    )


def _register_in_background(config: ServerConfig, name: str) -> None:
    """Register once the first worker answers ``/health``, from a daemon thread of this process."""
    from osmosis_ai.rollout.server.app import register_when_ready

    def register() -> None:
        try:
            asyncio.run(register_when_ready(config, name))
        except Exception:
            logger.exception("registering with the Osmosis Platform failed")

    threading.Thread(target=register, name="osmosis-register", daemon=True).start()


def reloadable_app() -> Any:
    """uvicorn factory for reloaded workers: the app rebuilt from ``OSMOSIS_SERVE_RELOAD_CONFIG`` (read once)."""
    # Taken out at once: the agent and every process it starts must not inherit the server key.
    # (The reloader process keeps it to start the next worker.)
    raw = os.environ.pop(RELOAD_CONFIG_ENV, None)
    if not raw:
        raise ServeError(
            f"{RELOAD_CONFIG_ENV} is not set; start the server with serve_agent_loop(reload=True)"
        )
    agent_loop, config = _rebuilt(json.loads(raw))
    return _built(agent_loop, config)


def _load_agent(spec: str | dict[str, Any]) -> Any:
    """The agent loop :func:`_agent_spec` named: the object, or an instance of the class; or the
    ``LocalBackend`` made of the parts it named; or the 0.3 pair as a 0.2 agent loop."""
    if isinstance(spec, dict) and "loop" in spec:
        from osmosis_ai.rollout.bridge.loop_backend import AgentLoopBackend

        return AgentLoopBackend(_load_agent(spec["loop"]))
    if isinstance(spec, dict) and "pair" in spec:
        from osmosis_ai.rollout.loading import workflow_loop_of

        return workflow_loop_of(spec["pair"], _named(spec["pair"]), spec["grader"])
    if isinstance(spec, dict):
        from osmosis_ai.rollout.backend.local.backend import LocalBackend

        def config(travelled: dict[str, Any] | None) -> Any:
            return (
                None if travelled is None else _named(travelled["class"]).model_validate(travelled["value"])
            )

        return LocalBackend(
            workflow=_named(spec["workflow"]),
            grader=None if spec["grader"] is None else _named(spec["grader"]),
            workflow_config=config(spec["workflow_config"]),
            grader_config=config(spec["grader_config"]),
        )
    target = _named(spec)
    return target() if isinstance(target, type) else target


def _named(spec: str) -> Any:
    """The object ``module:attribute`` (a dotted attribute path) names."""
    import importlib

    module, _, attribute = spec.partition(":")
    target: Any = importlib.import_module(module)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


_EXPORTS = {"validate_and_report": "osmosis_ai.cli.commands.validate"}  # prints: it is the command's

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
