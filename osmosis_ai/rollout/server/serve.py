"""``serve_agent_loop``: validate an agent loop, build the app and run it under uvicorn.

Differences from osmosis-ai 0.2, all on the safe side of the same flags:

* ``local_debug`` without an explicit host binds ``127.0.0.1`` (0.2 exposed the unauthenticated server
  on every interface, D33); the public IP is detected only when it is needed (wildcard bind and
  registration), once.
* ``reload=True`` works (0.2's uvicorn exited at start-up, D17): uvicorn gets an import string and
  rebuilds the app from the agent's module in each reloaded worker. The worker's settings (server key,
  Platform token) travel in ``OSMOSIS_SERVE_RELOAD_CONFIG``, which the worker removes from its
  environment as soon as it has read it, so the agent's subprocesses never see them. ``--reload`` is a
  development mode: it runs plain ``uvicorn.run``, without :mod:`~osmosis_ai.rollout.server.runner`'s
  drain-while-serving (shutdown still drains in the lifespan, but inits are no longer answered 503
  meanwhile) and without its garbage-collector tuning.
* uvicorn runs with uvloop and httptools when installed, the access log off unless asked for.
* the generated API key is shown once in the start-up panel (TrainGate needs it) and never logged;
  console markup in user-provided strings is escaped (D34).
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from osmosis_ai._lazy import install_hint
from osmosis_ai.errors import OsmosisError

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.validator import ValidationResult

DEFAULT_PORT = 9000
DEFAULT_HOST = "0.0.0.0"
LOCAL_HOST = "127.0.0.1"
RELOAD_CONFIG_ENV = "OSMOSIS_SERVE_RELOAD_CONFIG"
_GRACEFUL_HTTP_SHUTDOWN_SECONDS = 5


class ServeError(OsmosisError):
    """The server cannot start as configured; the message says what to change."""


def validate_and_report(agent_loop: RolloutAgentLoop, *, verbose: bool = False) -> ValidationResult:
    """Validate ``agent_loop`` and print the report (errors to stderr); returns the result."""
    from osmosis_ai.rollout.console import console
    from osmosis_ai.rollout.validator import validate_agent_loop

    result = validate_agent_loop(agent_loop)
    name = result.agent_name or type(agent_loop).__name__
    warnings = [f"  - {warning}" for warning in result.warnings] if verbose else []
    if result.valid:
        console.print(console.escape(f"Agent loop {name!r} validated successfully ({result.tool_count} tools)."),
                      style="green")  # fmt: skip
        if result.warnings:
            console.print(f"{len(result.warnings)} warning(s){':' if verbose else ' (use -v to list them)'}")
        for line in warnings:
            console.print(console.escape(line), style="yellow")
        return result
    lines = [f"Agent loop {name!r} failed validation with {len(result.errors)} error(s):"]
    lines += [f"  - {error}" for error in result.errors]
    if warnings:
        lines += [f"{len(result.warnings)} warning(s):", *warnings]
    for line in lines:
        console.print_error(line)
    return result


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


def _agent_spec(agent_loop: RolloutAgentLoop) -> str:
    """``module:attribute`` that re-creates ``agent_loop`` in a fresh process (needed by ``--reload``)."""
    cls = type(agent_loop)
    module = sys.modules.get(cls.__module__)
    if module is None or cls.__module__ == "__main__":
        raise ServeError(
            "--reload needs the agent loop to live in an importable module (not __main__); "
            "run 'osmosis serve -m module:attribute --reload'"
        )
    for attribute, value in vars(module).items():
        if value is agent_loop:
            return f"{cls.__module__}:{attribute}"
    return f"{cls.__module__}:{cls.__qualname__}"


def _session_debug_dir(debug_dir: str | None) -> str | None:
    if not debug_dir:
        return None
    session = os.path.join(debug_dir, str(int(time.time())))
    try:
        os.makedirs(session, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"cannot create the debug log directory {session!r}: {exc}") from exc
    return session


def _print_panel(lines: list[tuple[str, str]]) -> None:
    from osmosis_ai.rollout.console import console

    console.panel("RolloutServer", "\n".join(f"{label}: {value}" for label, value in lines))


def serve_agent_loop(
    agent_loop: RolloutAgentLoop,
    *,
    host: str | None = None,
    port: int = DEFAULT_PORT,
    validate: bool = True,
    log_level: str = "info",
    reload: bool = False,
    settings: RolloutSettings | None = None,
    skip_register: bool = False,
    api_key: str | None = None,
    local_debug: bool = False,
    debug_dir: str | None = None,
    queue_limit: int | None = None,
    shutdown_grace_seconds: float | None = None,
    docs_enabled: bool = False,
    access_log: bool = False,
    credentials: Any = None,
) -> None:
    """Serve ``agent_loop`` until interrupted (blocks in uvicorn).

    ``host`` defaults to ``0.0.0.0``, or ``127.0.0.1`` with ``local_debug``. Unless ``skip_register``
    or ``local_debug``, Platform ``credentials`` are required (default: :func:`load_credentials`).
    ``queue_limit``, ``shutdown_grace_seconds`` and ``docs_enabled`` are passed to ``create_app``.
    With ``reload``, each reloaded worker reads its settings from the environment (``settings`` is
    not carried over).
    """
    _require_server_extra()
    from osmosis_ai.rollout.server.api_key import generate_api_key
    from osmosis_ai.rollout.server.registration import get_report_host, is_wildcard_host, load_credentials

    if local_debug:
        if api_key is not None:
            raise ServeError(
                "--api-key cannot be combined with --local: local debug mode disables authentication"
            )
        skip_register = True
    bind_host = host if host is not None else (LOCAL_HOST if local_debug else DEFAULT_HOST)
    if not skip_register:
        credentials = credentials if credentials is not None else load_credentials()
        if credentials is None:
            raise ServeError(
                "registering with the Osmosis Platform needs a login, which this version cannot do yet: "
                "pass --skip-register (keep API-key auth, no registration) or --local (no auth, loopback), "
                "or provide a Platform access token in OSMOSIS_ACCESS_TOKEN"
            )
    if validate:
        validate_and_report(agent_loop).raise_if_invalid()

    generated = api_key is None and not local_debug
    key = None if local_debug else (api_key or generate_api_key())
    session_dir = _session_debug_dir(debug_dir)
    name = str(getattr(agent_loop, "name", type(agent_loop).__name__))

    lines = [("Agent loop", name), ("Listening on", f"http://{bind_host}:{port}")]
    if is_wildcard_host(bind_host) and not skip_register:  # detected once, reused by the registration
        try:
            lines.append(("Public address", get_report_host(bind_host)))
        except Exception:
            lines.append(("Public address", "could not detect (set --host or OSMOSIS_PUBLIC_HOST)"))
    if key is None:
        lines.append(("API key", "disabled (local debug mode: no authentication)"))
    else:
        lines.append(("API key", key if generated else "(provided)"))
    if skip_register:
        lines.append(("Registration", "skipped (--local)" if local_debug else "skipped (--skip-register)"))
    if session_dir:
        lines.append(("Debug traces", session_dir))
    if reload:
        lines.append(("Reload", "on (watching the working directory)"))
    _print_panel(lines)

    options = _uvicorn_options(log_level, access_log)
    app_kwargs: dict[str, Any] = {
        "api_key": key,
        "debug_dir": session_dir,
        "queue_limit": queue_limit,
        "shutdown_grace_seconds": shutdown_grace_seconds,
        "docs_enabled": docs_enabled,
    }
    register_args: dict[str, Any] = {} if skip_register else {"server_host": bind_host, "server_port": port}
    if reload:
        _run_with_reload(agent_loop, app_kwargs, register_args, credentials, bind_host, port, options)
        return

    from osmosis_ai.rollout.server.app import create_app
    from osmosis_ai.rollout.server.runner import run_app

    app = create_app(
        agent_loop,
        settings=settings,
        credentials=None if skip_register else credentials,
        **register_args,
        **app_kwargs,
    )
    run_app(app, host=bind_host, port=port, **options)


def _run_with_reload(
    agent_loop: RolloutAgentLoop,
    app_kwargs: dict[str, Any],
    register_args: dict[str, Any],
    credentials: Any,
    host: str,
    port: int,
    options: dict[str, Any],
) -> None:
    import uvicorn

    config = {
        "agent": _agent_spec(agent_loop),
        "app": app_kwargs,
        "register": register_args,
        "access_token": getattr(credentials, "access_token", None) if register_args else None,
        "path": os.getcwd(),
    }
    # The reloaded worker is a child process: it inherits this variable, nothing is written to disk.
    os.environ[RELOAD_CONFIG_ENV] = json.dumps(config)
    uvicorn.run(
        "osmosis_ai.rollout.server.serve:reloadable_app",
        factory=True,
        reload=True,
        reload_dirs=[os.getcwd()],
        host=host,
        port=port,
        **options,
    )


def reloadable_app() -> Any:
    """uvicorn factory for ``--reload`` workers: rebuild the app from ``OSMOSIS_SERVE_RELOAD_CONFIG`` (once)."""
    from osmosis_ai.rollout.cli_utils import load_agent_loop
    from osmosis_ai.rollout.server.app import create_app
    from osmosis_ai.rollout.server.registration import PlatformCredentials

    # Taken out at once: the agent and every process it starts must not inherit the server key and
    # the Platform token. (The reloader process keeps it to start the next worker.)
    raw = os.environ.pop(RELOAD_CONFIG_ENV, None)
    if not raw:
        raise ServeError(f"{RELOAD_CONFIG_ENV} is not set; start the server with 'osmosis serve --reload'")
    config = json.loads(raw)
    if config["path"] not in sys.path:
        sys.path.insert(0, config["path"])
    token = config.get("access_token")
    credentials = PlatformCredentials(token) if token else None
    return create_app(
        load_agent_loop(config["agent"]), credentials=credentials, **config["register"], **config["app"]
    )
