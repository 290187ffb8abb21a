"""What a command line names, handed to the library's loader (:mod:`osmosis_ai.rollout.loading`).

The functions 0.2 offered here (``load_agent_loop``, ``load_attribute``, ...) raise
:class:`~osmosis_ai.cli.errors.CLIError`, as 0.2's did; the commands themselves let the loader's own
errors through, which the command line reports the same way (``Error: ...``).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.rollout import loading
from osmosis_ai.rollout.loading import AgentRef, source_digest

if TYPE_CHECKING:
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

__all__ = [
    "CLIError",
    "agent_digest",
    "agent_spec",
    "load_agent",
    "load_agent_loop",
    "load_attribute",
    "load_reward",
    "source_digest",
]


@contextlib.contextmanager
def _as_cli_error() -> Iterator[None]:
    try:
        yield
    except loading.LoadError as exc:
        error = CLIError(str(exc))
        error.user_traceback = getattr(exc, "user_traceback", None)  # type: ignore[attr-defined]
        raise error from exc.__cause__


def load_attribute(spec: str, **wording: Any) -> Any:
    """:func:`osmosis_ai.rollout.loading.load_attribute`, its errors a ``CLIError``."""
    with _as_cli_error():
        return loading.load_attribute(spec, **wording)


def load_agent_loop(module_path: str) -> RolloutAgentLoop:
    """The agent loop ``module_path`` (``module.path:attribute``) names; a class is instantiated."""
    with _as_cli_error():
        return loading.load_agent_loop(module_path)


def load_reward(spec: str) -> Callable[..., Any]:
    """Import a trainer-side reward function (``module.path:fn``) for ``osmosis rollout run --reward``."""
    with _as_cli_error():
        return loading.load_function(spec, what="reward function", example="e.g. 'my_rewards:score'")


def agent_ref(args: argparse.Namespace) -> AgentRef:
    """The agent chosen on the command line (:func:`osmosis_ai.cli.arguments.add_agent_arguments`)."""
    return AgentRef(
        getattr(args, "module", None),
        getattr(args, "mcp", None),
        getattr(args, "mcp_url", None),
        getattr(args, "grader", None),
    )


def load_agent(args: argparse.Namespace) -> RolloutAgentLoop:
    """The agent loop chosen on the command line: ``-m`` imports it, ``--mcp DIR`` and ``--mcp-url URL``
    build an ``MCPAgentLoop`` over those tools."""
    ref = agent_ref(args)
    if (ref.mcp or ref.mcp_url) and getattr(args, "reload", False):
        raise CLIError(
            "--reload re-imports an agent module, so it works with -m only, not with --mcp/--mcp-url"
        )
    return ref.load()


def agent_spec(args: argparse.Namespace) -> str:
    """The agent as the command line names it: ``MODULE:ATTR``, ``mcp:<absolute dir>`` or ``mcp-url:<url>``."""
    return agent_ref(args).spec


def agent_digest(args: argparse.Namespace, agent_loop: Any) -> str | None:
    """A digest of what an MCP agent runs (``None`` for ``-m``: its module is digested)."""
    ref = agent_ref(args)
    return ref.digest(agent_loop) if ref.mcp or ref.mcp_url else None
