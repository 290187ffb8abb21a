"""A progress bar on stderr for long judging runs, drawn only where someone can see it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def wants_progress(requested: bool | None, total: int) -> bool:
    """``requested`` if given, else: stderr is a terminal and there is more than one step."""
    if requested is not None:
        return requested
    return total > 1 and sys.stderr.isatty()


@contextmanager
def progress_bar(total: int, description: str, *, enabled: bool) -> Iterator[Callable[[], None]]:
    """Yield an ``advance()`` callable; with ``enabled`` it moves a rich progress bar on stderr."""
    if not enabled:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda: progress.advance(task)
