"""``osmosis serve``: validate a RolloutAgentLoop, build its app and run it under uvicorn.

:func:`serve_agent_loop` is the command's body and a public function (also importable from
``osmosis_ai.rollout.server.serve``). It prints the start-up panel and, once the server has
registered with the Osmosis Platform, the outcome of that registration.

* ``local_debug`` without an explicit host binds ``127.0.0.1``: the server has no authentication
  then, so it is not exposed on every interface. The public IP is detected only when it is needed
  (wildcard bind and registration), once.
* ``reload=True`` gives uvicorn an import string: each reloaded worker rebuilds the app from the
  agent's module (:func:`reloadable_app`). The worker's settings (server key, Platform token) travel
  in ``OSMOSIS_SERVE_RELOAD_CONFIG``, which the worker removes from its environment as soon as it has
  read it, so the agent's subprocesses never see them. ``--reload`` is a development mode: plain
  ``uvicorn.run``, without :mod:`~osmosis_ai.rollout.server.runner`'s drain-while-serving.
* uvicorn runs with uvloop and httptools when installed, the access log off unless asked for.
* the generated API key is shown once in the start-up panel (TrainGate needs it) and never logged;
  console markup in user-provided strings is escaped. A chosen key comes from ``--api-key-file``
  or ``$OSMOSIS_SERVE_API_KEY`` (``--api-key`` works too, but every user on the machine can read a
  command line).
* the port is bound before anything is printed, so a busy port is one ``Error:`` line and exit
  status 1, not a "Listening on" panel followed by uvicorn's error.
* the outbox of unacknowledged terminal callbacks is a file by default (:func:`default_outbox_path`:
  ``$XDG_STATE_HOME/osmosis/rollout-outbox/port-<port>.sqlite3``, ``~/.local/state`` without
  ``XDG_STATE_HOME``), so a restarted server re-sends what a killed one left; ``--outbox`` or
  ``$OSMOSIS_ROLLOUT_SERVER_OUTBOX_PATH`` choose another, ``:memory:`` keeps it in memory.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from osmosis_ai._lazy import install_hint
from osmosis_ai.cli.arguments import add_agent_arguments, finite_number, whole_number
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import console
from osmosis_ai.rollout.server.serve import DEFAULT_HOST, DEFAULT_PORT, LOCAL_HOST, ServeError

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.server.registration import RegistrationResult

RELOAD_CONFIG_ENV = "OSMOSIS_SERVE_RELOAD_CONFIG"
API_KEY_ENV = "OSMOSIS_SERVE_API_KEY"
_GRACEFUL_HTTP_SHUTDOWN_SECONDS = 5
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_agent_arguments(parser, module_help="agent loop as 'module.path:attribute' (instance or class)",
                        missing_is_usage=True)  # fmt: skip
    parser.add_argument(
        "-p",
        "--port",
        type=whole_number(1, 65535, name="port"),
        default=9000,
        help="port to bind (default: 9000)",
    )
    parser.add_argument(
        "-H", "--host", default=None, help="address to bind (default: 0.0.0.0; 127.0.0.1 with --local)"
    )
    parser.add_argument("--no-validate", action="store_true", help="skip validating the agent loop first")
    parser.add_argument(
        "--reload",
        action="store_true",
        help="development mode: restart when files in the working directory change (plain uvicorn: "
        "no 503 drain while shutting down, no GC tuning)",
    )
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, default="info", help="uvicorn log level (default: info)"
    )
    parser.add_argument(
        "--skip-register", action="store_true", help="do not register with the Osmosis Platform"
    )
    parser.add_argument(
        "--local",
        "--local-debug",
        dest="local",
        action="store_true",
        help="local debugging: no API key, no registration, bind 127.0.0.1 unless --host is given",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"API key TrainGate must send (visible to other users in 'ps'; prefer --api-key-file or "
        f"${API_KEY_ENV}; default: generated)",
    )
    parser.add_argument(
        "--api-key-file", metavar="PATH", default=None, help="read the API key from the first line of PATH"
    )
    parser.add_argument(
        "--outbox",
        metavar="PATH",
        default=None,
        help="SQLite file keeping terminal callbacks until TrainGate acknowledges them, re-sent after a "
        "restart (default: $OSMOSIS_ROLLOUT_SERVER_OUTBOX_PATH, else "
        "$XDG_STATE_HOME/osmosis/rollout-outbox/port-<port>.sqlite3; ':memory:' = not kept on disk)",
    )
    parser.add_argument(
        "--log", metavar="DIR", default=None, help="write per-rollout JSONL traces under DIR/<unix time>/"
    )
    parser.add_argument(
        "--queue-limit",
        type=whole_number(0),
        default=None,
        help="rollouts allowed to wait for a free slot; beyond it init answers 429 "
        "(default: $OSMOSIS_ROLLOUT_SERVER_MAX_QUEUED_ROLLOUTS, unset = unlimited)",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=finite_number(0),
        default=None,
        metavar="SECONDS",
        help="on shutdown, let running rollouts finish this long before ending them with ERROR "
        "(default: $OSMOSIS_ROLLOUT_SERVER_SHUTDOWN_GRACE_SECONDS, or 10)",
    )
    parser.add_argument("--docs", action="store_true", help="serve /docs, /redoc and /openapi.json")
    parser.add_argument("--access-log", action="store_true", help="log every HTTP request")
    parser.add_argument(
        "--json", action="store_true", help='report a failure to start as one {"error": ...} object on stdout'
    )


def _configure_logging(level: str) -> None:
    """Show the SDK's own log lines (rollout failures, registration) at the uvicorn log level."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    package = logging.getLogger("osmosis_ai")
    package.addHandler(handler)
    package.setLevel(level.upper())
    package.propagate = False


def _api_key(args: argparse.Namespace) -> str | None:
    """The key from ``--api-key``, ``--api-key-file`` or ``$OSMOSIS_SERVE_API_KEY``, in that order."""
    if args.api_key is not None and args.api_key_file is not None:
        raise CLIError("give the key once: --api-key or --api-key-file, not both")
    if args.api_key is not None:
        if not args.api_key.strip():
            raise CLIError("--api-key must not be empty")
        return str(args.api_key)
    if args.api_key_file is not None:
        try:
            with open(args.api_key_file, encoding="utf-8") as file:
                key = file.readline().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CLIError(f"cannot read the API key file {args.api_key_file}: {exc}") from None
        if not key:
            raise CLIError(f"the API key file {args.api_key_file} is empty; put the key on its first line")
        return key
    from_env = os.environ.get(API_KEY_ENV)
    if from_env is not None:
        if not from_env.strip():
            raise CLIError(f"${API_KEY_ENV} is set but empty; unset it to generate a key")
        return from_env.strip()
    return None


def run(args: argparse.Namespace) -> int:
    api_key = _api_key(args)
    if args.local and api_key is not None and args.api_key is None:
        if args.api_key_file is not None:
            raise CLIError(
                "--api-key-file cannot be combined with --local: local debug mode disables authentication"
            )
        api_key = None  # a key in the environment does not stop local debugging
    from osmosis_ai.cli.loading import load_agent

    _configure_logging(args.log_level)
    agent_loop = load_agent(args)
    serve_agent_loop(
        agent_loop,
        host=args.host,
        port=args.port,
        validate=not args.no_validate,
        log_level=args.log_level,
        reload=args.reload,
        skip_register=args.skip_register,
        api_key=api_key,
        local_debug=args.local,
        debug_dir=args.log,
        queue_limit=args.queue_limit,
        shutdown_grace_seconds=args.shutdown_grace,
        docs_enabled=args.docs,
        access_log=args.access_log,
        outbox_path=args.outbox,
    )
    return 0


def print_registration_result(
    result: RegistrationResult, host: str, port: int, agent_loop_name: str, api_key: str | None = None
) -> None:
    """Console report of a registration (a wildcard ``host`` is not detected again just for display)."""
    from osmosis_ai.rollout.server.registration import is_wildcard_host

    address = (
        f"http://{host}:{port}"
        if not is_wildcard_host(host)
        else f"this server's public address, port {port}"
    )
    if result.success and result.is_healthy:
        active = (result.server_info or {}).get("active_rollouts", 0)
        lines = [
            (f"[OK] Registered {agent_loop_name!r} with the Osmosis Platform at {address}", "green"),
            (f"     server id: {result.server_id}, status: healthy, active rollouts: {active}", None),
        ]
    elif result.success:
        lines = [
            (f"[WARNING] Registered {agent_loop_name!r}, but the Platform's health check failed: {result.error}",
             "yellow"),
            (f"          Make sure the Platform can reach {address} (firewall, public address).", None),
        ]  # fmt: skip
    else:
        lines = [
            (f"[WARNING] Registration with the Osmosis Platform failed: {result.error}", "yellow"),
            ("          The server keeps running; TrainGate can still reach it directly.", None),
        ]
    for text, style in lines:
        console.print(console.escape(text), style=style)


def _registration_printer(host: str, port: int, agent_loop_name: str) -> Callable[[RegistrationResult], None]:
    def render(result: RegistrationResult) -> None:
        print_registration_result(result, host, port, agent_loop_name)

    return render


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


def default_outbox_path(port: int) -> str:
    """Where ``osmosis serve`` keeps its outbox when none is configured (one file per port)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "osmosis", "rollout-outbox", f"port-{port}.sqlite3")


def _bind(host: str, port: int) -> socket.socket:
    """The listening address, bound now: a busy port is an error before anything is printed."""
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


def _open_outbox_path(outbox_path: str | None, settings: RolloutSettings, port: int) -> str:
    path = outbox_path or settings.server.outbox_path or default_outbox_path(port)
    if path == ":memory:":
        return path
    import sqlite3

    from osmosis_ai.rollout.server.outbox import Outbox

    try:  # opened once here so that a bad path is an error line before the panel
        Outbox(path).close()
    except (OSError, sqlite3.Error) as exc:
        raise ServeError(
            f"cannot open the outbox {path}: {exc}; choose another file with --outbox "
            "(or ':memory:' to keep undelivered callbacks in memory only)"
        ) from None
    return path


def _session_debug_dir(debug_dir: str | None) -> str | None:
    if not debug_dir:
        return None
    session = os.path.join(debug_dir, str(int(time.time())))
    try:
        os.makedirs(session, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"cannot create the debug log directory {session!r}: {exc}") from exc
    return session


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
    outbox_path: str | None = None,
) -> None:
    """Serve ``agent_loop`` until interrupted (blocks in uvicorn).

    ``host`` defaults to ``0.0.0.0``, or ``127.0.0.1`` with ``local_debug``. Unless ``skip_register``
    or ``local_debug``, Platform ``credentials`` are required (default: :func:`load_credentials`).
    ``queue_limit``, ``shutdown_grace_seconds`` and ``docs_enabled`` are passed to ``create_app``.
    With ``reload``, each reloaded worker reads its settings from the environment (``settings`` is
    not carried over). ``outbox_path``: see the module docstring.
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
                "registering with the Osmosis Platform needs a login: run 'osmosis login' "
                "('osmosis login --device' on a machine without a browser) or set OSMOSIS_TOKEN; "
                "or pass --skip-register (keep API-key auth, no registration) or --local (no auth, loopback)"
            )
    if validate:
        from osmosis_ai.cli.commands.validate import validate_and_report

        validate_and_report(agent_loop).raise_if_invalid()

    if settings is None:
        from osmosis_ai.rollout.config.settings import get_settings

        settings = get_settings()
    generated = api_key is None and not local_debug
    key = None if local_debug else (api_key or generate_api_key())
    outbox = _open_outbox_path(outbox_path, settings, port)
    sock = _bind(bind_host, port)
    if reload:
        sock.close()  # checked; uvicorn's reloader binds it itself
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
    lines.append(("Outbox", outbox if outbox != ":memory:" else "in memory (lost if the process is killed)"))
    if session_dir:
        lines.append(("Debug traces", session_dir))
    if reload:
        lines.append(("Reload", "on (watching the working directory)"))
    console.panel("RolloutServer", "\n".join(f"{label}: {value}" for label, value in lines))

    options = _uvicorn_options(log_level, access_log)
    app_kwargs: dict[str, Any] = {
        "api_key": key,
        "debug_dir": session_dir,
        "queue_limit": queue_limit,
        "shutdown_grace_seconds": shutdown_grace_seconds,
        "docs_enabled": docs_enabled,
        "outbox_path": outbox,
    }
    register_args: dict[str, Any] = {}
    if not skip_register:
        register_args = {
            "server_host": bind_host,
            "server_port": port,
            "on_registration": _registration_printer(bind_host, port, name),
        }
    if reload:
        _run_with_reload(agent_loop, app_kwargs, register_args, credentials, bind_host, port, options)
        return

    from osmosis_ai.rollout.server.app import create_app
    from osmosis_ai.rollout.server.runner import run_app, tune_gc

    app = create_app(
        agent_loop,
        settings=settings,
        credentials=None if skip_register else credentials,
        **register_args,
        **app_kwargs,
    )
    tune_gc()  # this process is the server now: the application, not the library, tunes it
    run_app(
        app,
        host=bind_host,
        port=port,
        sock=sock,
        header_timeout_seconds=settings.server.header_timeout_seconds,
        **options,
    )


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
        "register": {k: v for k, v in register_args.items() if k != "on_registration"},  # JSON only
        "access_token": getattr(credentials, "access_token", None) if register_args else None,
        "path": os.getcwd(),
    }
    # The reloaded worker is a child process: it inherits this variable, nothing is written to disk.
    os.environ[RELOAD_CONFIG_ENV] = json.dumps(config)
    uvicorn.run(
        "osmosis_ai.cli.commands.serve:reloadable_app",
        factory=True,
        reload=True,
        reload_dirs=[os.getcwd()],
        host=host,
        port=port,
        **options,
    )


def reloadable_app() -> Any:
    """uvicorn factory for ``--reload`` workers: rebuild the app from ``OSMOSIS_SERVE_RELOAD_CONFIG`` (once)."""
    from osmosis_ai.cli.loading import load_agent_loop
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
    agent_loop = load_agent_loop(config["agent"])
    register = config["register"]
    if register:
        name = str(getattr(agent_loop, "name", type(agent_loop).__name__))
        host, port = register["server_host"], register["server_port"]
        register = {**register, "on_registration": _registration_printer(host, port, name)}
    return create_app(agent_loop, credentials=credentials, **register, **config["app"])
