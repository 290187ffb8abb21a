"""What a resumable scoring run shows as it goes (``reward score``, ``regrade``, ``eval-rubric``): the
line that says what will run (the command's own), the resume line, how the scoring runs and on
which backend, and a progress bar over the items still to run, from the run's events
(:func:`osmosis_ai.runs.run.run`'s ``on_event``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.output import progress_bar, say, wants_progress, warn

if TYPE_CHECKING:
    from osmosis_ai.runs.plan import RunPlan
    from osmosis_ai.runs.run import RunEnd


class RunProgress(contextlib.AbstractContextManager["RunProgress"]):
    """The run's commentary (see the module docstring), the bar closed with the context. ``opening``
    gives the line saying what will run (``None``: none); ``scoring`` shows how the scoring runs;
    ``bar`` forces the progress bar on or off (default: on a terminal, for more than one item)."""

    def __init__(
        self,
        *,
        quiet: bool,
        unit: str,
        label: str,
        retry_failed: bool,
        opening: Callable[[Any], str | None],
        scoring: bool = True,
        bar: bool | None = None,
    ) -> None:
        self.quiet, self.unit, self.label, self.retry_failed = quiet, unit, label, retry_failed
        self.opening, self.scoring, self.bar = opening, scoring, bar
        self.stack = contextlib.ExitStack()
        self.advance: Callable[..., None] = lambda **_: None
        self.shown = False  # whether the bar is drawn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stack.close()

    def on_event(self, event: Any) -> None:
        from osmosis_ai.cli.journals import resuming_line
        from osmosis_ai.runs.events import Opened, Ready
        from osmosis_ai.runs.result import Result

        if isinstance(event, Result):
            self.advance(score=event.reward if event.success else None, failed=not event.success)
        elif isinstance(event, Opened):
            if (line := self.opening(event)) is not None:
                say(line, quiet=self.quiet)
            if event.set_aside is not None:
                warn(event.set_aside.describe())
            if event.remaining < event.planned:
                done = event.planned - event.remaining
                line = resuming_line(done, event.planned, self.unit, failed=event.failed,
                                     retry_failed=self.retry_failed, kept=event.kept)  # fmt: skip
                say(line, quiet=self.quiet)
            self.shown = not self.quiet and wants_progress(self.bar, event.remaining)
            bar = progress_bar(event.remaining, self.label, enabled=self.shown)
            self.advance = self.stack.enter_context(bar)
        elif isinstance(event, Ready):
            # On Ray each worker scores with a runtime of its own: the header says how many.
            for line in event.scoring if self.scoring and not event.backend else ():
                say(f"Scoring: {line}", quiet=self.quiet)
            if event.backend:
                say(event.backend, quiet=self.quiet)


async def run_plan(
    plan: RunPlan,
    labels: dict[str, Any],
    *,
    quiet: bool,
    unit: str,
    label: str,
    opening: Callable[[Any], str | None],
) -> RunEnd:
    """:func:`osmosis_ai.runs.run.run` of a journalled ``plan`` with its :class:`RunProgress`, the
    journal's refusals as one line each."""
    from osmosis_ai.cli.journals import journal_refusals
    from osmosis_ai.runs.run import journal_file, run

    retry_failed = plan.journal is not None and plan.journal.retry_failed
    progress = RunProgress(quiet=quiet, unit=unit, label=label, retry_failed=retry_failed, opening=opening)
    with progress, journal_refusals(journal_file(plan)):
        return await run(plan, progress.on_event, labels=labels)
