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
    from osmosis_ai.rollout.backend.local.backend import LocalBackend
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
    or ``mcp_url`` (a running MCP server); ``grader`` (``MODULE:CLASS``), a 0.3 ``Grader`` for the
    0.3 ``AgentWorkflow`` that ``module`` names."""

    module: str | None = None
    mcp: str | None = None
    mcp_url: str | None = None
    grader: str | None = None

    @property
    def spec(self) -> str:
        """The agent as a run names it: ``MODULE:ATTR``, ``mcp:<absolute dir>`` or ``mcp-url:<url>``."""
        if self.mcp:
            return f"mcp:{Path(self.mcp).resolve()}"
        if self.mcp_url:
            return f"mcp-url:{self.mcp_url}"
        return str(self.module) if self.grader is None else f"{self.module}+{self.grader}"

    def load(self) -> RolloutAgentLoop:
        """The agent loop: ``module`` imported, or an ``MCPAgentLoop`` over the MCP tools."""
        if not (self.mcp or self.mcp_url):
            return load_agent_loop(str(self.module), grader=self.grader)
        if self.grader is not None:
            raise LoadError("a grader goes with an AgentWorkflow named by -m, not with MCP tools")
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
        from osmosis_ai.rollout.bridge.workflow_loop import WorkflowAgentLoop

        if isinstance(agent_loop, WorkflowAgentLoop):  # the user's classes, not the adapter's module
            digest = hashlib.sha256()
            backend = agent_loop.backend
            for cls in (backend.workflow_cls, backend.grader_cls):
                digest.update(b"-" if cls is None else source_digest(cls).encode())
            return digest.hexdigest()
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


def load_agent_loop(module_path: str, grader: str | None = None) -> RolloutAgentLoop:
    """Import ``module_path`` (``module.path:attribute``) and return the agent loop instance it names.

    A class attribute must subclass ``RolloutAgentLoop`` and is instantiated without arguments. A 0.3
    pair is run as an agent loop (:class:`~osmosis_ai.rollout.bridge.workflow_loop.WorkflowAgentLoop`):
    an ``AgentWorkflow`` subclass with ``grader`` (``module.path:GraderClass``, optional), a
    ``LocalBackend``, or the app ``create_rollout_server`` built around one.
    """
    from osmosis_ai.rollout.core.base import RolloutAgentLoop

    target = load_attribute(module_path, what="agent loop", example=_EXAMPLE, suggest=_candidates)
    workflow = workflow_loop_of(module_path, target, grader)
    if workflow is not None:
        return workflow
    if grader is not None:
        raise LoadError(
            f"{module_path!r} is not a 0.3 AgentWorkflow: a grader goes with an AgentWorkflow subclass"
        )
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


def workflow_loop_of(module_path: str, target: Any, grader: str | None) -> RolloutAgentLoop | None:
    """``target`` (what ``module_path`` names) as a 0.2 agent loop when it is a 0.3 workflow (with
    ``grader``, a ``module.path:GraderClass``), backend or server app; else ``None``."""
    from osmosis_ai.rollout.agent_workflow import AgentWorkflow
    from osmosis_ai.rollout.backend.local.backend import LocalBackend
    from osmosis_ai.rollout.bridge.workflow_loop import WorkflowAgentLoop, served_backend

    target = served_backend(target) or target  # a 0.3 server's app carries its backend
    if isinstance(target, LocalBackend):
        if grader is not None:
            raise LoadError(
                f"{module_path!r} already has its grader (its LocalBackend's): leave out --grader"
            )
        return WorkflowAgentLoop(target)
    if not (isinstance(target, type) and issubclass(target, AgentWorkflow)):
        return None
    try:
        return WorkflowAgentLoop(LocalBackend(workflow=target, grader=grader))
    except TypeError as exc:
        raise LoadError(f"--grader {grader!r}: {exc}") from None


_SERVE_EXPECTED = (
    "a RolloutAgentLoop instance or subclass (0.2 wire), a LocalBackend instance, an AgentWorkflow "
    "subclass or the app create_rollout_server built (0.3 wire)"
)


def _kind(value: Any) -> str:
    return f"the class {value.__qualname__}" if isinstance(value, type) else f"a {type(value).__name__}"


def load_serve_target(spec: str, grader: str | None = None) -> RolloutAgentLoop | LocalBackend:
    """What ``osmosis serve`` serves: the agent loop ``spec`` names (0.2), or a ``LocalBackend`` —
    the one ``spec`` names, or one running the ``AgentWorkflow`` subclass ``spec`` names with the
    ``Grader`` subclass ``grader`` names, if any (0.3)."""
    from osmosis_ai.rollout.agent_workflow import AgentWorkflow
    from osmosis_ai.rollout.backend.local.backend import LocalBackend
    from osmosis_ai.rollout.bridge.workflow_loop import served_backend
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.grader import Grader

    target = load_attribute(spec, what="serve target", example=_EXAMPLE, suggest=_candidates)
    target = served_backend(target) or target  # a 0.3 server's app carries its backend
    is_workflow = isinstance(target, type) and issubclass(target, AgentWorkflow)
    if grader is not None and not is_workflow:
        raise LoadError(
            f"a grader goes with an AgentWorkflow subclass, and {spec!r} is {_kind(target)}"
            + (": a LocalBackend names its own grader" if isinstance(target, LocalBackend) else "")
        )
    if isinstance(target, LocalBackend):
        return target
    if is_workflow:
        grader_cls = None
        if grader is not None:
            grader_cls = load_attribute(grader, what="grader", example="e.g. 'main:MyGrader'")
            if not (isinstance(grader_cls, type) and issubclass(grader_cls, Grader)):
                raise LoadError(f"the grader {grader!r} is {_kind(grader_cls)}, expected a Grader subclass")
        return LocalBackend(workflow=target, grader=grader_cls)
    if isinstance(target, RolloutAgentLoop) or (
        isinstance(target, type) and issubclass(target, RolloutAgentLoop)
    ):
        return load_agent_loop(spec)
    raise LoadError(f"{spec!r} is {_kind(target)}; expected {_SERVE_EXPECTED}")


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
