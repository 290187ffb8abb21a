"""``osmosis serve``: run a RolloutAgentLoop as a RolloutServer (flags of osmosis-ai 0.2, plus a few new ones)."""

from __future__ import annotations

import argparse
import logging

from osmosis_ai.cli.arguments import finite_number, whole_number
from osmosis_ai.errors import CLIError

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m", "--module", required=True, help="agent loop as 'module.path:attribute' (instance or class)"
    )
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
    parser.add_argument("--api-key", default=None, help="API key TrainGate must send (default: generated)")
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


def _configure_logging(level: str) -> None:
    """Show the SDK's own log lines (rollout failures, registration) at the uvicorn log level."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    package = logging.getLogger("osmosis_ai")
    package.addHandler(handler)
    package.setLevel(level.upper())
    package.propagate = False


def run(args: argparse.Namespace) -> int:
    if args.api_key is not None and not args.api_key.strip():
        raise CLIError("--api-key must not be empty")
    from osmosis_ai.rollout.cli_utils import load_agent_loop
    from osmosis_ai.rollout.server.serve import serve_agent_loop

    _configure_logging(args.log_level)
    agent_loop = load_agent_loop(args.module)
    try:
        serve_agent_loop(
            agent_loop,
            host=args.host,
            port=args.port,
            validate=not args.no_validate,
            log_level=args.log_level,
            reload=args.reload,
            skip_register=args.skip_register,
            api_key=args.api_key,
            local_debug=args.local,
            debug_dir=args.log,
            queue_limit=args.queue_limit,
            shutdown_grace_seconds=args.shutdown_grace,
            docs_enabled=args.docs,
            access_log=args.access_log,
        )
    except (ImportError, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    return 0
