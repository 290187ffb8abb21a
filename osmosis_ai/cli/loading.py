"""Loading what a command line names: an agent loop (``module.path:attribute``, an MCP tools directory
or a running MCP server), a reward function.

Every failure is a :class:`~osmosis_ai.cli.errors.CLIError` whose message says what was wrong and what a
valid value looks like; the CLI prints it as ``Error: ...`` without a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.errors import CLIError

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

_EXAMPLE = "e.g. 'my_agent:agent_loop' or 'package.module:MyAgentLoop'"


def _import_module(module_path: str) -> object:
    # The working directory comes first so a user's own modules win; it stays on sys.path because the
    # agent module may import its siblings lazily while serving.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_path)
    except (Exception, SystemExit) as exc:  # the user's code ran: whatever it raised is theirs to fix
        from osmosis_ai.cli.user_code import import_failure

        raise import_failure(module_path, exc) from exc


def _public_attributes(module: object) -> str:
    public = sorted(name for name in vars(module) if not name.startswith("_"))
    return f"its public attributes are: {', '.join(public) or '(none)'}"


def _candidates(module: object) -> str:
    """What the user probably meant: the module's agent loops, else its public attributes."""
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

    public = {name: value for name, value in vars(module).items() if not name.startswith("_")}
    agents = sorted(
        name
        for name, value in public.items()
        if isinstance(value, RolloutAgentLoop)
        or (isinstance(value, type) and issubclass(value, RolloutAgentLoop) and not inspect.isabstract(value))
    )
    if agents:
        return f"agent loops defined there: {', '.join(agents)}"
    return _public_attributes(module)


def load_attribute(
    spec: str,
    *,
    what: str = "reference",
    example: str = "e.g. 'my_module:name'",
    suggest: Callable[[object], str] = _public_attributes,
) -> Any:
    """Import ``spec`` (``module.path:attribute``, the working directory first on ``sys.path``) and
    return the attribute. ``what``/``example`` word the error for a malformed spec; ``suggest(module)``
    names what the user may have meant when the attribute is missing.
    """
    module_path, sep, attr_name = spec.rpartition(":")
    if not sep or not module_path or not attr_name:
        raise CLIError(f"invalid {what} {spec!r}: expected 'module.path:attribute' ({example})")
    module = _import_module(module_path)
    if not hasattr(module, attr_name):
        raise CLIError(f"module {module_path!r} has no attribute {attr_name!r}; {suggest(module)}")
    return getattr(module, attr_name)


def load_agent_loop(module_path: str) -> RolloutAgentLoop:
    """Import ``module_path`` (``module.path:attribute``) and return the agent loop instance it names.

    A class attribute must subclass ``RolloutAgentLoop`` and is instantiated without arguments.
    """
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

    target = load_attribute(module_path, what="agent loop", example=_EXAMPLE, suggest=_candidates)
    if isinstance(target, type):
        if not issubclass(target, RolloutAgentLoop):
            raise CLIError(f"{module_path!r} is a class but not a RolloutAgentLoop subclass")
        try:
            target = target()
        except Exception as exc:
            raise CLIError(
                f"cannot instantiate {module_path!r} without arguments: {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(target, RolloutAgentLoop):
        raise CLIError(
            f"{module_path!r} is a {type(target).__name__}, not a RolloutAgentLoop instance or subclass ({_EXAMPLE})"
        )
    return target


def load_reward(spec: str) -> Callable[..., Any]:
    """Import a trainer-side reward function (``module.path:fn``) for ``osmosis rollout run --reward``."""
    fn = load_attribute(spec, what="reward function", example="e.g. 'my_rewards:score'")
    if not callable(fn):
        raise CLIError(f"reward function {spec!r} is a {type(fn).__name__}, not a callable")
    return fn


def reward_runtime(spec: str, args: argparse.Namespace, *, kind: str) -> Any:
    """The reward runtime scoring with ``spec`` as ``--reward-timeout``/``--reward-workers``/
    ``--reward-memory-limit`` say (the function is checked by the caller first: :func:`load_attribute`)."""
    from osmosis_ai.rewards.runtime import RewardRuntime, RewardRuntimeError

    try:
        return RewardRuntime(
            spec,
            timeout=args.reward_timeout or None,
            workers=args.reward_workers,
            memory_limit_mb=args.reward_memory_limit,
            kind=kind,
        )
    except RewardRuntimeError as exc:
        raise CLIError(f"{kind} {spec!r}: {exc}") from None


def load_agent(args: argparse.Namespace) -> RolloutAgentLoop:
    """The agent loop chosen on the command line (see :func:`osmosis_ai.cli.arguments.add_agent_arguments`):
    ``-m`` imports it, ``--mcp DIR`` and ``--mcp-url URL`` build an ``MCPAgentLoop`` over those tools."""
    mcp_dir, mcp_url = getattr(args, "mcp", None), getattr(args, "mcp_url", None)
    if not (mcp_dir or mcp_url):
        return load_agent_loop(args.module)
    if getattr(args, "reload", False):
        raise CLIError(
            "--reload re-imports an agent module, so it works with -m only, not with --mcp/--mcp-url"
        )
    from osmosis_ai.rollout.mcp.errors import MCPLoadError

    try:
        from osmosis_ai.rollout.mcp.agent_loop import MCPAgentLoop
        from osmosis_ai.rollout.mcp.loader import load_mcp_server

        agent = MCPAgentLoop(load_mcp_server(mcp_dir) if mcp_dir else mcp_url)
    except MCPLoadError as exc:
        raise CLIError(str(exc).replace("\n", " ")) from exc
    _follow_agent_logging()
    return agent


def _follow_agent_logging() -> None:
    """fastmcp logs every failing tool call with a full traceback on its own handler (set up when it is
    imported, so only now can it be changed). The model already gets the failure as a tool message, so
    those tracebacks are shown only when the command shows the agents' own log records (--debug,
    --verbose, serve)."""
    import logging

    if not logging.getLogger("osmosis_ai.rollout").isEnabledFor(logging.ERROR):
        for name in ("fastmcp", "FastMCP"):  # 3.x and later, 2.x
            logging.getLogger(name).setLevel(logging.CRITICAL)


def agent_spec(args: argparse.Namespace) -> str:
    """The agent as the command line names it: ``MODULE:ATTR``, ``mcp:<absolute dir>`` or ``mcp-url:<url>``."""
    if getattr(args, "mcp", None):
        return f"mcp:{Path(args.mcp).resolve()}"
    if getattr(args, "mcp_url", None):
        return f"mcp-url:{args.mcp_url}"
    return str(args.module)


def agent_digest(args: argparse.Namespace, agent_loop: Any) -> str | None:
    """A digest of what an MCP agent runs — every file of the tools directory, or the tool schemas a
    running server offers — so an edited tool is noticed; ``None`` for ``-m`` (its module is digested)."""
    digest = hashlib.sha256()
    if getattr(args, "mcp", None):
        root = Path(args.mcp).resolve()
        for file in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
            digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
        return digest.hexdigest()
    if getattr(args, "mcp_url", None):
        digest.update(repr(agent_loop.get_tools(None)).encode())
        return digest.hexdigest()
    return None


def source_digest(obj: Any) -> str:
    """A digest of the code behind ``obj`` (its module's file), so an edited agent or function is noticed."""
    target = inspect.unwrap(obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj))
    try:
        source = Path(inspect.getfile(target)).read_bytes()
    except (OSError, TypeError) as exc:
        raise CLIError(f"cannot read the source of {obj!r} to fingerprint the run: {exc}") from exc
    return hashlib.sha256(source).hexdigest()
