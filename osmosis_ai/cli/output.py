"""Everything the ``osmosis`` commands show: the console, progress bars and the ``Error: ...`` line.

:class:`Console` writes through rich when it is installed and the target is a terminal, and plain
text (ANSI colours on a terminal) otherwise. Styles are rich style strings ("bold red", "green");
the plain fallback understands their basic words. Text passed to ``panel``/``table`` is escaped, so
user-provided strings never act as markup. ``osmosis_ai.rollout.console`` re-exports this module's
public names.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from importlib.util import find_spec
from typing import IO, Any

RICH_AVAILABLE = find_spec("rich") is not None

_ANSI = {
    "bold": "1", "dim": "2", "italic": "3", "underline": "4", "red": "31", "green": "32", "yellow": "33",
    "blue": "34", "magenta": "35", "cyan": "36", "white": "37",
}  # fmt: skip


class Console:
    """Writes to ``file`` (default stdout), through rich when it is installed and ``file`` is a terminal."""

    def __init__(
        self, *, file: IO[str] | None = None, force_terminal: bool | None = None, no_color: bool = False
    ):
        self._file = file
        self._force_terminal = force_terminal
        self.no_color = no_color or "NO_COLOR" in os.environ

    @property
    def file(self) -> IO[str]:
        # Looked up at each write, so a console made at import time follows later redirections.
        return self._file if self._file is not None else sys.stdout

    @property
    def is_tty(self) -> bool:
        if self._force_terminal is not None:
            return self._force_terminal
        isatty = getattr(self.file, "isatty", None)
        return bool(isatty and isatty())

    @property
    def use_rich(self) -> bool:
        return RICH_AVAILABLE and self.is_tty and not self.no_color

    def _rich(self) -> Any:
        from rich.console import Console as RichConsole

        return RichConsole(file=self.file, force_terminal=self._force_terminal, no_color=self.no_color)

    @staticmethod
    def escape(text: str) -> str:
        """``text`` with rich markup neutralised (unchanged when rich is missing)."""
        if not RICH_AVAILABLE:
            return text
        from rich.markup import escape

        return escape(text)

    def format_styled(self, text: str, style: str | None) -> str:
        """``text`` wrapped in ANSI codes for ``style`` on a colour terminal, else unchanged."""
        if not style or self.no_color or not self.is_tty:
            return text
        codes = [_ANSI[word] for word in style.split() if word in _ANSI]
        return f"\033[{';'.join(codes)}m{text}\033[0m" if codes else text

    def print(
        self,
        *args: Any,
        style: str | None = None,
        end: str = "\n",
        sep: str = " ",
        file: IO[str] | None = None,
        flush: bool = False,
        **kwargs: Any,
    ) -> None:
        """Like the builtin ``print`` (``sep``, ``end``, ``file``, ``flush``), plus a rich ``style``.

        Other keywords are rich's (``markup``, ``highlight``, ``justify``, ...); plain output has no
        use for them and ignores them.
        """
        if file is not None and file is not self.file:
            other = Console(file=file, force_terminal=self._force_terminal, no_color=self.no_color)
            other.print(*args, style=style, end=end, sep=sep, flush=flush, **kwargs)
            return
        if self.use_rich:
            self._rich().print(*args, style=style, end=end, sep=sep, **kwargs)
        else:
            text = sep.join(str(arg) for arg in args)
            print(self.format_styled(text, style), end=end, file=self.file)
        if flush:
            self.file.flush()

    def print_error(self, message: str) -> None:
        """``message`` (shown literally) on stderr, bold red where colours are available."""
        stderr = Console(file=sys.stderr, force_terminal=self._force_terminal, no_color=self.no_color)
        stderr.print(stderr.escape(message) if stderr.use_rich else message, style="bold red")

    def separator(self, title: str = "", width: int = 60) -> None:
        line = f" {title} ".center(width, "─") if title else "─" * width
        self.print(line, style="dim")

    def panel(
        self, title: str, content: str, *, style: str = "blue", padding: tuple[int, int] = (0, 1)
    ) -> None:
        """``content`` in a titled box (escaped: shown literally)."""
        if self.use_rich:
            from rich.panel import Panel

            box = Panel(self.escape(content), title=self.escape(title), border_style=style, padding=padding,
                        expand=False)  # fmt: skip
            self._rich().print(box)
            return
        lines = content.splitlines() or [""]
        pad = " " * padding[1]
        width = max(len(title) + 2, *(len(line) for line in lines)) + 2 * padding[1]
        self.print(f"┌{f' {title} '.center(width, '─')}┐", style=style)
        for line in lines:
            self.print(f"│{pad}{line.ljust(width - 2 * padding[1])}{pad}│")
        self.print(f"└{'─' * width}┘", style=style)

    def table(
        self, rows: Sequence[Sequence[Any]], *, title: str | None = None, headers: Sequence[str] | None = None
    ) -> None:
        """Rows of cells as aligned columns (escaped: shown literally)."""
        cells = [[str(cell) for cell in row] for row in rows]
        if self.use_rich:
            from rich.table import Table

            table = Table(title=self.escape(title) if title else None, show_header=headers is not None)
            for header in headers or [""] * max((len(r) for r in cells), default=0):
                table.add_column(self.escape(header))
            for row in cells:
                table.add_row(*(self.escape(cell) for cell in row))
            self._rich().print(table)
            return
        everything = ([list(headers)] if headers else []) + cells
        widths = [
            max(len(row[i]) for row in everything if i < len(row)) for i in range(max(map(len, everything)))
        ]
        if title:
            self.print(title, style="bold")
        for index, row in enumerate(everything):
            self.print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
            if headers and index == 0:
                self.print("  ".join("-" * w for w in widths))

    def input(self, prompt: str = "", style: str | None = None) -> str:
        return input(self.format_styled(prompt, style))

    def run_rich(self, render_fn: Callable[[Any], None]) -> bool:
        """Call ``render_fn(rich_console)`` when rich output is in use; returns whether it ran."""
        if not self.use_rich:
            return False
        render_fn(self._rich())
        return True


console = Console()


def setup_logging(level: int | None) -> None:
    """Send library log records to stderr at ``level``; with ``None``, errors only, and the agents' own
    failures silenced: a command reports those per row in its summary."""
    import logging

    logging.basicConfig(level=level or logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    if level is None:
        logging.getLogger("osmosis_ai.rollout").setLevel(logging.CRITICAL)


@contextmanager
def logging_restored() -> Iterator[None]:
    """Undo what :func:`setup_logging` did once the block ends (its root handler, the levels), so a
    command run in-process through ``main()`` leaves the caller's logging as it found it."""
    import logging

    root, quieted = logging.getLogger(), logging.getLogger("osmosis_ai.rollout")
    handlers, levels = list(root.handlers), (root.level, quieted.level)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(levels[0])
        quieted.setLevel(levels[1])


def say(line: str, *, quiet: bool) -> None:
    """One line of a command's running commentary on stdout, unless ``-q`` asked for the outcome only."""
    if not quiet:
        print(line, flush=True)


def interrupted(unit: str) -> int:
    """Tell a resumable run's user that Ctrl-C kept what finished (on stderr, even with ``-q``); 130."""
    print(f"Interrupted: the finished {unit}s are kept in the journal; run the same command again to resume.",
          file=sys.stderr)  # fmt: skip
    return 130


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # a stream without a file descriptor (captured)
        return None


@contextmanager
def user_output_to_stderr(enabled: bool = True) -> Iterator[None]:
    """While a ``--json`` command runs (``enabled``): what it and the user's code print goes to stderr.

    ``sys.stdout`` is stderr meanwhile, and so is file descriptor 1 when stdout has one, so an agent's,
    reward's or eval function's output (``print``, C extensions, subprocesses) cannot break the one
    JSON object :func:`json_result` prints on the real stdout once the command is done.
    """
    if not enabled:
        yield
        return
    saved = sys.stdout
    saved.flush()
    out, err = _fileno(saved), _fileno(sys.stderr)
    kept = os.dup(out) if out is not None and err is not None else None
    if kept is not None and out is not None and err is not None:
        os.dup2(err, out)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = saved
        if kept is not None and out is not None:
            os.dup2(kept, out)
            os.close(kept)


def warn(message: str) -> None:
    """One ``Warning: <message>`` line on stderr (shown with ``-q`` and ``--json`` too): something the
    command recovered from and the user should know about."""
    print(f"Warning: {message}", file=sys.stderr, flush=True)


def format_duration(ms: float) -> str:
    """A duration for a progress line: ``850ms``, ``12.3s``, ``2m5.0s``."""
    if ms < 1000:
        return f"{ms:.0f}ms"
    if ms < 60000:
        return f"{ms / 1000:.1f}s"
    minutes, rest = divmod(ms / 1000, 60)
    return f"{int(minutes)}m{rest:.1f}s"


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (whitespace runs become one space), cut to ``limit`` characters with ``...``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def error(message: object) -> None:
    """The one ``Error: <message>`` line a failed command prints, on stderr."""
    console.print_error(f"Error: {message}")


_SECRET_NAME = re.compile(r"key|token|secret|password|credential", re.IGNORECASE)


def error_object(exc: BaseException, *, command: str) -> dict[str, Any]:
    """``{"code", "message", "details"}`` for a failure: ``code`` is the error class in snake case
    (``dataset_parse_error``; ``interrupted`` for Ctrl-C), ``details`` the command, the class and the
    error's plain public attributes (never one named like a secret)."""
    name = type(exc).__name__
    code = (
        "interrupted"
        if isinstance(exc, KeyboardInterrupt)
        else re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    )
    details: dict[str, Any] = {"command": command, "type": f"{type(exc).__module__}.{name}"}
    for attr, value in vars(exc).items():
        if attr.startswith("_") or attr == "user_traceback" or _SECRET_NAME.search(attr):
            continue
        if value is None or isinstance(value, (str, int, float, bool)):
            details[attr] = value
    return {"code": code, "message": str(exc), "details": details}


class JsonResult:
    """What a command run with ``--json`` prints: its result object, and on failure an ``"error"``
    member beside it (or alone), so stdout is always exactly one JSON object."""

    def __init__(self) -> None:
        self.value: Any = None
        self.has_value = False
        self.indent: int | None = None
        self.error: dict[str, Any] | None = None
        self.reason: str | None = None

    def fail(self, exc: BaseException, *, command: str) -> None:
        self.error = error_object(exc, command=command)

    def failed_quietly(self, status: int, *, command: str) -> None:
        """The command returned ``status`` without raising: the error says why (:func:`json_failure`)."""
        message = self.reason or f"{command} exited with status {status}"
        self.error = {"code": "failed", "message": message, "details": {"command": command, "status": status}}

    def render(self) -> str | None:
        if self.error is None:
            return (
                json.dumps(self.value, ensure_ascii=False, indent=self.indent, default=str)
                if self.has_value
                else None
            )
        if isinstance(self.value, dict):
            return json.dumps(
                {**self.value, "error": self.error}, ensure_ascii=False, indent=self.indent, default=str
            )
        return json.dumps({"error": self.error}, ensure_ascii=False)


_JSON_RESULT: ContextVar[JsonResult | None] = ContextVar("osmosis_json_result", default=None)


@contextmanager
def json_result(*, enabled: bool) -> Iterator[JsonResult]:
    """Collect the ``--json`` result of one command run (``main`` opens it) and print it at the end."""
    result = JsonResult()
    token = _JSON_RESULT.set(result if enabled else None)
    try:
        yield result
    finally:
        _JSON_RESULT.reset(token)
        text = result.render() if enabled else None
        if text is not None:
            print(text, flush=True)


def json_failure(reason: str) -> None:
    """Why the command is about to return a non-zero status without raising, for ``--json``'s error."""
    collector = _JSON_RESULT.get()
    if collector is not None:
        collector.reason = reason


def print_json(value: Any, *, indent: int | None = None) -> None:
    """A command's ``--json`` result: kept for the one object ``main`` prints at the end of the run,
    or printed at once when the command runs outside ``main``."""
    collector = _JSON_RESULT.get()
    if collector is not None:
        collector.value, collector.has_value, collector.indent = value, True, indent
        return
    print(json.dumps(value, ensure_ascii=False, indent=indent, default=str), flush=True)


def rich_console(*, stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr), for the reports drawn as rich tables."""
    from rich.console import Console as RichConsole

    return RichConsole(stderr=stderr)


def wants_progress(requested: bool | None, total: int, stream: IO[str] | None = None) -> bool:
    """``requested`` if given, else: ``stream`` (default stderr) is a terminal and there is more than one step."""
    if requested is not None:
        return requested
    return total > 1 and (stream or sys.stderr).isatty()


class Advance:
    """What a progress bar's ``advance`` is called with: one step done, its score when it has one,
    and whether it failed; the bar shows the running mean score and the failures so far."""

    def __init__(self) -> None:
        self.total = 0.0
        self.scored = 0
        self.failed = 0

    def note(self, score: float | None, failed: bool) -> str:
        if score is not None:
            self.total += score
            self.scored += 1
        self.failed += failed
        parts = [f"mean {self.total / self.scored:.3f}"] if self.scored else []
        if self.failed:
            parts.append(f"{self.failed} failed")
        return ", ".join(parts)


ProgressStep = Callable[..., None]


@contextmanager
def progress_bar(
    total: int, description: str, *, enabled: bool, stderr: bool = True, rich: Any = None
) -> Iterator[ProgressStep]:
    """Yield an ``advance(score=None, failed=False)`` callable; with ``enabled`` it moves a transient
    rich progress bar (on ``rich``, a rich console, when given) with labelled elapsed and remaining
    times, the running mean score and the failures."""
    if not enabled:
        yield lambda score=None, failed=False: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[stats]}"),
    )
    stats = Advance()
    with Progress(*columns, console=rich or rich_console(stderr=stderr), transient=True) as progress:
        task = progress.add_task(description, total=total, stats="")

        def advance(score: float | None = None, failed: bool = False) -> None:
            progress.update(task, advance=1, stats=stats.note(score, failed))

        yield advance
