"""``osmosis serve``: the command line of :func:`osmosis_ai.rollout.server.serve.serve_agent_loop`.

It reads the options (the server key from ``--api-key``, ``--api-key-file`` — open to its owner
only — or ``$OSMOSIS_SERVE_API_KEY``, which it removes from the environment once read), builds the one ``ServerConfig`` and renders what the library reports:
the validation line and the start-up panel (the generated API key is shown there once, TrainGate
needs it, and never logged; console markup in user-provided strings is escaped), then the outcome of
the Platform registration. The command, not the library, tunes the garbage collector of the process
it owns (``tune_gc``), once the app is built.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
from typing import TYPE_CHECKING

from osmosis_ai.cli.arguments import add_agent_arguments, finite_number, whole_number
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import console, json_failure
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.rollout.server.serve import DEFAULT_PORT

if TYPE_CHECKING:
    from osmosis_ai.rollout.server.registration import RegistrationResult
    from osmosis_ai.rollout.server.serve import ServeStarted

API_KEY_ENV = "OSMOSIS_SERVE_API_KEY"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_agent_arguments(parser, module_help="what to serve, as 'module.path:attribute': a RolloutAgentLoop "
                        "(instance or class; 0.2 wire), or a LocalBackend or AgentWorkflow subclass (0.3 wire)",
                        missing_is_usage=True)  # fmt: skip
    parser.add_argument(
        "--wire",
        choices=("0.2", "0.3"),
        default=None,
        help="the protocol to serve (default: the target's own): 0.2 serves a 0.3 workflow/grader pair to a "
        "0.2 trainer; 0.3 serves a 0.2 RolloutAgentLoop to a 0.3 controller",
    )
    parser.add_argument(
        "-p",
        "--port",
        type=whole_number(1, 65535, name="port"),
        default=DEFAULT_PORT,
        help=f"port to bind (default: {DEFAULT_PORT})",
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
    declare_files(parser, read=["api_key_file"], read_and_written=["outbox"])
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
    parser.add_argument(
        "--workers",
        type=whole_number(1, 256),
        default=None,
        metavar="N",
        help="processes serving the port, each with its own event loop; duplicate inits are "
        "deduplicated across them (0.3 wire: a rollout is polled and cancelled on any of them) (default: 1)",
    )
    parser.add_argument(
        "--state",
        metavar="URL_OR_PATH",
        default=None,
        help="where the state shared by processes lives (the dedupe; for the 0.3 wire the rollouts and "
        "results): redis://HOST:PORT/DB for replicas on "
        "several hosts (the redis extra), or an SQLite file in a directory that exists (default with "
        "--workers: beside the outbox)",
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
                mode = os.fstat(file.fileno()).st_mode & 0o777
                key = file.readline().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CLIError(f"cannot read the API key file {args.api_key_file}: {exc}") from None
        if mode & 0o077:
            raise CLIError(
                f"the API key file {args.api_key_file} is open to other users (mode {mode:04o}); "
                f"run 'chmod 600 {args.api_key_file}'"
            )
        if not key:
            raise CLIError(f"the API key file {args.api_key_file} is empty; put the key on its first line")
        return key
    from_env = os.environ.pop(API_KEY_ENV, None)  # read once: the agent's subprocesses must not inherit it
    if from_env is not None:
        if not from_env.strip():
            raise CLIError(f"${API_KEY_ENV} is set but empty; unset it to generate a key")
        return from_env.strip()
    return None


def _state(value: str | None) -> str | None:
    from osmosis_ai.rollout.core.exceptions import RolloutValueError
    from osmosis_ai.rollout.server.state_redis import check_location

    if value is None:
        return None
    if not value.strip():
        raise CLIError("--state must not be empty")
    try:
        check_location(value)
    except RolloutValueError as exc:
        raise CLIError(f"--state: {exc}") from None
    return value


def _worker_started(log_level: str) -> None:
    """What each ``--workers`` process does first: the SDK's log lines, and the GC tuned for serving."""
    from osmosis_ai.rollout.server.runner import tune_gc

    _configure_logging(log_level)
    tune_gc()


def run(args: argparse.Namespace) -> int:
    if args.reload and args.workers is not None:
        raise CLIError("--reload and --workers cannot be combined: --reload restarts one development process")
    state = _state(args.state)
    api_key = _api_key(args)
    if args.local and api_key is not None:
        if args.api_key is not None:
            raise CLIError(
                "--api-key cannot be combined with --local: local debug mode disables authentication"
            )
        if args.api_key_file is not None:
            raise CLIError(
                "--api-key-file cannot be combined with --local: local debug mode disables authentication"
            )
        api_key = None  # a key in the environment does not stop local debugging
    from osmosis_ai.cli.loading import load_agent
    from osmosis_ai.rollout.backend.local.backend import LocalBackend
    from osmosis_ai.rollout.bridge.loop_backend import AgentLoopBackend
    from osmosis_ai.rollout.config.settings import get_settings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.loading import load_agent_loop, load_serve_target
    from osmosis_ai.rollout.server.config import ServerConfig
    from osmosis_ai.rollout.server.errors import STARTUP_FAILURE_STATUS, ServerStartError
    from osmosis_ai.rollout.server.serve import serve_agent_loop

    _configure_logging(args.log_level)
    if args.grader is not None and args.module is None:
        raise CLIError("--grader goes with -m naming an AgentWorkflow subclass, not with --mcp/--mcp-url")
    if args.wire is not None and args.module is None:
        raise CLIError("--wire goes with -m; --mcp/--mcp-url agents are served on 0.2's wire")
    agent_loop: RolloutAgentLoop | LocalBackend
    if args.module is None:
        agent_loop = load_agent(args)
    elif args.wire == "0.2":
        agent_loop = load_agent_loop(args.module, args.grader)
    else:
        agent_loop = load_serve_target(args.module, args.grader)
        if args.wire == "0.3" and isinstance(agent_loop, RolloutAgentLoop):
            agent_loop = AgentLoopBackend(agent_loop)
    settings = get_settings()
    chosen = {"max_queued_rollouts": args.queue_limit, "shutdown_grace_seconds": args.shutdown_grace,
              "outbox_path": args.outbox}  # fmt: skip
    report = _Report()
    config = ServerConfig(
        server=settings.server.model_copy(update={k: v for k, v in chosen.items() if v is not None}),
        client=settings.client,
        api_key=api_key,
        debug_dir=args.log,
        host=args.host,
        port=args.port,
        docs_enabled=args.docs,
        on_registration=report.registered,
        state=state,
    )
    workers = args.workers or 1
    try:
        serve_agent_loop(
            agent_loop,
            config=config,
            validate=not args.no_validate,
            log_level=args.log_level,
            reload=args.reload,
            skip_register=args.skip_register,
            local_debug=args.local,
            access_log=args.access_log,
            on_started=report.started,
            workers=workers,
            on_worker_start=functools.partial(_worker_started, args.log_level) if workers > 1 else None,
        )
    except ServerStartError as exc:  # its reason is already logged: no second line for it
        json_failure(str(exc))
        return STARTUP_FAILURE_STATUS
    return 0


class _Report:
    """What ``osmosis serve`` prints: the validation line and the start-up panel, then the registration."""

    def __init__(self) -> None:
        self.info: ServeStarted | None = None

    def started(self, info: ServeStarted) -> None:
        from osmosis_ai.rollout.server.registration import is_wildcard_host

        self.info = info
        if info.validation is not None:
            from osmosis_ai.cli.commands.validate import report_validation

            report_validation(info.validation, info.validation.agent_name or info.agent_loop_name)
        what = "Agent loop" if info.wire == "0.2" else "Workflow (0.3 wire)"
        lines = [(what, info.agent_loop_name), ("Listening on", f"http://{info.host}:{info.port}")]
        if info.registers and is_wildcard_host(info.host):
            lines.append(
                ("Public address", info.public_host or "could not detect (set --host or OSMOSIS_PUBLIC_HOST)")
            )
        if info.api_key is None:
            lines.append(("API key", "disabled (local debug mode: no authentication)"))
        else:
            lines.append(("API key", info.api_key if info.api_key_generated else "(provided)"))
        if info.wire == "0.3":
            lines.append(("Registration", "none (a 0.3 controller is given the server's URL)"))
        elif not info.registers:
            lines.append(
                ("Registration", "skipped (--local)" if info.local_debug else "skipped (--skip-register)")
            )
        if info.wire == "0.2":  # the 0.3 wire has no callbacks to keep
            outbox = info.outbox if info.outbox != ":memory:" else "in memory (lost if the process is killed)"
            lines.append(("Outbox", outbox))
        if info.debug_dir:
            lines.append(("Debug traces", info.debug_dir))
        if info.reload:
            lines.append(("Reload", "on (watching the working directory)"))
        if info.workers > 1:
            lines.append(("Workers", str(info.workers)))
        if info.state is not None:
            lines.append(("Dedupe state" if info.wire == "0.2" else "Rollouts and results", info.state))
        console.panel("RolloutServer", "\n".join(f"{label}: {value}" for label, value in lines))
        if not info.reload and info.workers == 1:
            from osmosis_ai.rollout.server.runner import tune_gc

            tune_gc()  # this process is the server now: the application, not the library, tunes it

    def registered(self, result: RegistrationResult) -> None:
        assert self.info is not None  # the library reports the start before it registers
        print_registration_result(result, self.info.host, self.info.port, self.info.agent_loop_name)


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
