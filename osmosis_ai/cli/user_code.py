"""Reporting a failure inside the user's own module the way the user needs it: their file and line.

Importing a module the command line names runs the user's code under ``importlib`` and our loader;
a raw traceback would be mostly those frames. :func:`import_failure` turns what the import raised
(an exception, or ``sys.exit()`` called at import time) into a :class:`UserCodeError` whose message
names the user's file and line, and which carries the traceback trimmed to the user's frames; the
command line prints that traceback when asked to be verbose (``-v``/``--debug``).
"""

from __future__ import annotations

import sysconfig
import traceback
from pathlib import Path

from osmosis_ai.cli.errors import CLIError

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
_LIBRARY_DIRS = tuple(
    {
        str(Path(path).resolve())
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_path(key))
    }
)


class UserCodeError(CLIError):
    """The user's module failed while being imported; ``user_traceback`` shows where, in their code."""

    def __init__(self, message: str, user_traceback: str) -> None:
        super().__init__(message)
        self.user_traceback = user_traceback


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
