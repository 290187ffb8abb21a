"""Console output for the rollout commands: rich on a terminal, plain text (ANSI colours on a TTY) otherwise.

``Console`` keeps osmosis-ai 0.2's interface (``print``, ``print_error``, ``separator``, ``panel``,
``table``, ``escape``, ``format_styled``, ``input``, ``run_rich``, ``is_tty``, ``use_rich``). Styles are
rich style strings ("bold red", "green"); the plain fallback understands their basic words. Text
passed to ``panel``/``table`` is escaped, so user-provided strings never act as markup (0.2 D34).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
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

    def _rich(self, stderr: bool = False) -> Any:
        from rich.console import Console as RichConsole

        target = sys.stderr if stderr else self.file
        return RichConsole(file=target, force_terminal=self._force_terminal, no_color=self.no_color)

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

    def print(self, *args: Any, style: str | None = None, end: str = "\n", **kwargs: Any) -> None:
        if self.use_rich:
            self._rich().print(*args, style=style, end=end, **kwargs)
            return
        text = " ".join(str(arg) for arg in args)
        print(self.format_styled(text, style), end=end, file=self.file)

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
