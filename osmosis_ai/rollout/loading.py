"""Loading the user's code a run names: an agent loop (``module.path:attribute``, an MCP tools
directory or a running MCP server), a reward or eval function.

Every failure is a :class:`LoadError` whose message says what was wrong and what a valid value looks
like. A failure inside the user's own module is a :class:`UserCodeError` naming their file and line,
carrying the traceback trimmed to their frames (the command line shows it when asked to be verbose).
The same code loads an agent in the command's process and on each Ray worker, from an
:class:`AgentRef` (plain, picklable data).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import logging
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.errors import OsmosisError

if TYPE_CHECKING:
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

_EXAMPLE = "e.g. 'my_agent:agent_loop' or 'package.module:MyAgentLoop'"
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
_LIBRARY_DIRS = tuple(
    {
        str(Path(path).resolve())
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_path(key))
    }
)


class LoadError(OsmosisError):
    """What a run names cannot be loaded: a malformed reference, a missing attribute, a wrong type."""


class UserCodeError(LoadError):
    """The user's module failed while being imported; ``user_traceback`` shows where, in their code."""

    def __init__(self, message: str, user_traceback: str) -> None:
        super().__init__(message)
        self.user_traceback = user_traceback


@dataclass(frozen=True)
class AgentRef:
    """The agent a run names: exactly one of ``module`` (``MODULE:ATTR``), ``mcp`` (a tools directory)
    or ``mcp_url`` (a running MCP server)."""

    module: str | None = None
    mcp: str | None = None
    mcp_url: str | None = None

    @property
    def spec(self) -> str:
        """The agent as a run names it: ``MODULE:ATTR``, ``mcp:<absolute dir>`` or ``mcp-url:<url>``."""
        if self.mcp:
            return f"mcp:{Path(self.mcp).resolve()}"
        if self.mcp_url:
            return f"mcp-url:{self.mcp_url}"
        return str(self.module)

    def load(self) -> RolloutAgentLoop:
        """The agent loop: ``module`` imported, or an ``MCPAgentLoop`` over the MCP tools."""
        if not (self.mcp or self.mcp_url):
            return load_agent_loop(str(self.module))
        from osmosis_ai.rollout.mcp.errors import MCPLoadError

        try:
            from osmosis_ai.rollout.mcp.agent_loop import MCPAgentLoop
            from osmosis_ai.rollout.mcp.loader import load_mcp_server

            agent = MCPAgentLoop(load_mcp_server(self.mcp) if self.mcp else self.mcp_url)
        except MCPLoadError as exc:
            raise LoadError(str(exc).replace("\n", " ")) from exc
        _quiet_tool_tracebacks()
        return agent

    def digest(self, agent_loop: Any) -> str:
        """A digest of the code the agent runs — its module's file, every file of an MCP tools
        directory, or the tool schemas a running MCP server offers — so an edited agent is noticed."""
        if self.mcp:
            return directory_digest(Path(self.mcp))
        if self.mcp_url:
            return hashlib.sha256(repr(agent_loop.get_tools(None)).encode()).hexdigest()
        return source_digest(agent_loop)


def _quiet_tool_tracebacks() -> None:
    """fastmcp logs every failing tool call with a full traceback on its own handler (set up when it is
    imported, so only now can it be changed). The model already gets the failure as a tool message, so
    those tracebacks are shown only when the agents' own log records are (``--debug``, ``serve``)."""
    if not logging.getLogger("osmosis_ai.rollout").isEnabledFor(logging.ERROR):
        for name in ("fastmcp", "FastMCP"):  # 3.x and later, 2.x
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _import_module(module_path: str) -> object:
    # The working directory comes first so a user's own modules win; it stays on sys.path because the
    # agent module may import its siblings lazily while serving.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_path)
    except (Exception, SystemExit) as exc:  # the user's code ran: whatever it raised is theirs to fix
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
        raise LoadError(f"invalid {what} {spec!r}: expected 'module.path:attribute' ({example})")
    module = _import_module(module_path)
    if not hasattr(module, attr_name):
        raise LoadError(f"module {module_path!r} has no attribute {attr_name!r}; {suggest(module)}")
    return getattr(module, attr_name)


def load_agent_loop(module_path: str) -> RolloutAgentLoop:
    """Import ``module_path`` (``module.path:attribute``) and return the agent loop instance it names.

    A class attribute must subclass ``RolloutAgentLoop`` and is instantiated without arguments.
    """
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

    target = load_attribute(module_path, what="agent loop", example=_EXAMPLE, suggest=_candidates)
    if isinstance(target, type):
        if not issubclass(target, RolloutAgentLoop):
            raise LoadError(f"{module_path!r} is a class but not a RolloutAgentLoop subclass")
        try:
            target = target()
        except Exception as exc:
            raise LoadError(
                f"cannot instantiate {module_path!r} without arguments: {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(target, RolloutAgentLoop):
        raise LoadError(
            f"{module_path!r} is a {type(target).__name__}, not a RolloutAgentLoop instance or subclass ({_EXAMPLE})"
        )
    return target


def load_function(spec: str, *, what: str, example: str) -> Callable[..., Any]:
    """Import the callable ``spec`` names (a reward or eval function)."""
    fn = load_attribute(spec, what=what, example=example)
    if not callable(fn):
        raise LoadError(f"{what} {spec!r} is a {type(fn).__name__}, not a callable")
    return fn


def directory_digest(root: Path) -> str:
    """A digest of every Python file under ``root`` (names and contents), so an edit to any of them
    is noticed; ``__pycache__`` and hidden directories (a ``.venv``) are left out."""
    digest = hashlib.sha256()
    root = root.resolve()
    for file in sorted(root.rglob("*.py")):
        parts = file.relative_to(root).parts
        if "__pycache__" in parts or any(part.startswith(".") for part in parts[:-1]):
            continue
        digest.update("/".join(parts).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def source_digest(obj: Any) -> str:
    """A digest of the code behind ``obj`` (its module's file), so an edited agent or function is noticed."""
    target = inspect.unwrap(obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj))
    try:
        source = Path(inspect.getfile(target)).read_bytes()
    except (OSError, TypeError) as exc:
        raise LoadError(f"cannot read the source of {obj!r} to fingerprint the run: {exc}") from exc
    return hashlib.sha256(source).hexdigest()


def _ours(filename: str) -> bool:
    return filename.startswith("<frozen ") or filename.startswith(_PACKAGE_DIR)


def _library(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS)


def _user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The traceback from the first frame in the user's code on (the import machinery left out)."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not _ours(frame.filename)]
    first = next((index for index, frame in enumerate(frames) if not _library(frame.filename)), len(frames))
    return frames[first:]


def _location(exc: BaseException, frames: list[traceback.FrameSummary]) -> str | None:
    """``FILE, line N`` of the innermost frame in the user's code (a syntax error's own position)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}, line {exc.lineno}"
    own = [frame for frame in frames if not _library(frame.filename)] or frames
    if not own:
        return None
    return f"{own[-1].filename}, line {own[-1].lineno}"


def _traceback_text(exc: BaseException, frames: list[traceback.FrameSummary]) -> str:
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip("\n")


def _names_the_module_itself(missing: str | None, module_path: str) -> bool:
    """Whether the missing module is the one asked for (or its package), not one it imports."""
    return bool(missing) and (module_path == missing or module_path.startswith(f"{missing}."))


def import_failure(module_path: str, exc: BaseException) -> UserCodeError:
    """The error to report when importing ``module_path`` raised ``exc`` (``SystemExit`` included)."""
    frames = _user_frames(exc)
    where = _location(exc, frames)
    at = f" (at {where})" if where else ""
    if isinstance(exc, SystemExit):
        code = exc.code if exc.code is not None else 0
        message = f"module {module_path!r} exited during import with code {code}{at}; a module must not call sys.exit() when imported"
    elif isinstance(exc, ModuleNotFoundError) and _names_the_module_itself(exc.name, module_path):
        message = f"cannot import module {module_path!r}: {exc}"
    else:
        text = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        message = f"importing module {module_path!r} failed{at}: {detail}"
    return UserCodeError(message, _traceback_text(exc, frames))
