"""A run's journal as the command line sees it: refusals that name the flag getting past them, an
unused journal not left behind, and the resume line that says what a rerun will and will not run again."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import warn
from osmosis_ai.outcome import Outcome, OutcomeCounts, plural
from osmosis_ai.runs.run import kept_if_used

__all__ = ["journal_refusals", "kept_if_used", "open_journal", "resuming_line"]

if TYPE_CHECKING:
    from osmosis_ai.runs.journal import Journal

# What to fix before a failure kept on resume is worth running again (with --fresh).
_FIXES = {
    Outcome.REWARD_ERROR: "the reward",
    Outcome.AGENT_ERROR: "the agent",
    Outcome.NO_MODEL_CALLS: "the agent",
}


@contextlib.contextmanager
def journal_refusals(path: Path) -> Iterator[None]:
    """The journal's refusals within the block turned into one line naming ``--fresh`` or ``--journal``."""
    from osmosis_ai.runs.journal import JournalLockedError, JournalMismatchError

    try:
        yield
    except JournalMismatchError as exc:
        raise CLIError(
            f"the journal {path} belongs to another run: {', '.join(exc.changed)} changed since it was "
            "written; run with --fresh to start over (the old journal is kept as a backup)"
        ) from None
    except JournalLockedError as exc:
        holder = f" ({exc.holder})" if exc.holder else ""
        raise CLIError(
            f"the journal {path} is in use by another run{holder}; wait for it to finish, or give this "
            "run its own with --journal FILE"
        ) from None


def open_journal(
    path: Path,
    description: Mapping[str, Any],
    *,
    fresh: bool,
    labels: Mapping[str, Any],
    samples_path: Path | None = None,
) -> Journal:
    """:meth:`Journal.open` with :func:`journal_refusals`; a damaged journal it set aside is one
    ``Warning:`` line on stderr."""
    from osmosis_ai.runs.journal import Journal

    with journal_refusals(path):
        journal = Journal.open(path, description, fresh=fresh, labels=labels, samples_path=samples_path)
    if journal.set_aside is not None:
        warn(journal.set_aside.describe())
    return journal


def resuming_line(
    done: int, total: int, unit: str, *, failed: int, retry_failed: bool, kept: OutcomeCounts
) -> str:
    """``Resuming: 30 of 32 runs already finished`` and, when some of those failed and will not run
    again, how to run them again: ``failed`` with ``--retry-failed``, ``kept`` only with ``--fresh``."""
    line = f"Resuming: {done} of {total} {unit}s already finished"
    rerun = 0 if retry_failed else failed
    held = kept.total
    hints = []
    if rerun:
        hints.append(f"add --retry-failed to run {'those' if not held else f'{rerun} of them'} again")
    if held:
        named = " and ".join(f"{kept[o]} {plural(o.value, kept[o])}" for o in Outcome if kept[o])
        fixes = {_FIXES.get(o) for o in kept.counts if kept[o]}
        fix = f"fix {fixes.pop()} and " if len(fixes) == 1 and None not in fixes else ""
        hints.append(f"{named} {'is' if held == 1 else 'are'} kept: {fix}run with --fresh")
    if hints:
        line += f" ({rerun + held} of them failed; {'; '.join(hints)})"
    return line
