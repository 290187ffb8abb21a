"""Loading what a command line names as ``module.path:attribute``: an agent loop, a reward function.

Every failure is a :class:`~osmosis_ai.cli.errors.CLIError` whose message says what was wrong and what a
valid value looks like; the CLI prints it as ``Error: ...`` without a traceback.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.errors import CLIError

if TYPE_CHECKING:
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

__all__ = ["CLIError", "load_agent_loop", "load_attribute", "load_reward"]

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
