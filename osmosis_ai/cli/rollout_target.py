"""The rollout server an ``osmosis rollout`` sub-command drives: the agent served in-process with
``-m module:attr``, or a running server at ``--url`` (with its Bearer key).

``run``, ``bench`` and ``check`` share it, so it lives below all three commands.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from osmosis_ai.cli.arguments import (
    add_agent_arguments,
    add_max_concurrency_argument,
    concurrency_value,
    finite_number,
    whole_number,
)
from osmosis_ai.consts import SERVER_KEY_ENV

__all__ = ["SERVER_KEY_ENV", "add_target_arguments", "rollout_server"]


def add_target_arguments(parser: argparse.ArgumentParser, *, adaptive: bool = False) -> None:
    """The options naming the server and how hard to drive it; ``adaptive`` lets ``--concurrency`` be ``auto``."""
    target = add_agent_arguments(
        parser, module_help="agent loop to serve in-process, e.g. examples.calculator.agent:agent_loop"
    )
    target.add_argument("--url", help="base URL of a running rollout server, e.g. http://127.0.0.1:9000")
    parser.add_argument(
        "--server-api-key", metavar="KEY", help=f"Bearer key of the --url server (default: ${SERVER_KEY_ENV})"
    )
    if adaptive:
        parser.add_argument("--concurrency", type=concurrency_value, default=8, metavar="N|auto",
                            help="rollouts in flight, or 'auto' to follow what the policy's server can take "
                            "(default 8)")  # fmt: skip
        add_max_concurrency_argument(parser, "--concurrency")
    else:
        parser.add_argument(
            "--concurrency", type=whole_number(1), default=8, help="rollouts in flight (default 8)"
        )
    parser.add_argument(
        "--timeout",
        type=finite_number(0, exclusive=True),
        default=300.0,
        help="seconds each rollout may take before it counts as lost (default 300)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show library log messages")


@contextlib.asynccontextmanager
async def rollout_server(
    args: argparse.Namespace, agent_loop: Any = None
) -> AsyncIterator[tuple[str, str | None]]:
    """Yield (base URL, Bearer key) of the rollout server to drive: in-process for ``-m``, else ``--url``.

    ``agent_loop`` is the already loaded ``-m`` agent, if the caller loaded it.
    """
    if args.url:
        yield args.url, args.server_api_key or os.environ.get(SERVER_KEY_ENV) or None
        return
    from osmosis_ai.cli.loading import load_agent
    from osmosis_ai.traingate.local_server import serve_agent_loop_locally

    if agent_loop is None:
        agent_loop = load_agent(args)
    async with serve_agent_loop_locally(agent_loop) as url:
        yield url, None
