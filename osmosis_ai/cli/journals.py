"""A run's journal as the command line sees it: refusals that name the flag getting past them, an
unused journal not left behind, and the resume line that says what a rerun will and will not run again."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output import warn

if TYPE_CHECKING:
    from osmosis_ai.evaluation.journal import Journal


def open_journal(
    path: Path,
    description: Mapping[str, Any],
    *,
    fresh: bool,
    labels: Mapping[str, Any],
    samples_path: Path | None = None,
) -> Journal:
    """:meth:`Journal.open`, its refusals turned into one line naming ``--fresh`` or ``--journal``; a
    damaged journal it set aside is one ``Warning:`` line on stderr."""
    from osmosis_ai.evaluation.journal import Journal, JournalLockedError, JournalMismatchError

    try:
        journal = Journal.open(path, description, fresh=fresh, labels=labels, samples_path=samples_path)
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
    if journal.set_aside is not None:
        warn(journal.set_aside.describe())
    return journal


@contextlib.contextmanager
def kept_if_used(journal: Journal) -> Iterator[Journal]:
    """``journal`` for the block, then closed; one this run created and committed nothing to (a
    refused preflight, a mistake found before the first result, Ctrl-C) is deleted with its files,
    so no empty run is left to list or to find."""
    from osmosis_ai.evaluation.journal_store import journal_root, remove

    try:
        yield journal
    finally:
        try:
            unused = journal.created and journal.is_empty()
        except sqlite3.Error:  # a journal that cannot say is kept, and the run's own error shown
            unused = False
        journal.close()
        if unused:
            remove(journal.path, journal_root())


def resuming_line(done: int, total: int, unit: str, *, failed: int, retry_failed: bool) -> str:
    """``Resuming: 30 of 32 runs already finished`` and, when some of those failed and will not run
    again, how to run them again."""
    line = f"Resuming: {done} of {total} {unit}s already finished"
    if failed and not retry_failed:
        line += f" ({failed} of them failed; add --retry-failed to run those again)"
    return line
