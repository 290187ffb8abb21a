"""What a run tells its caller as it goes (:func:`osmosis_ai.runs.run.run`'s ``on_event``), besides
each :class:`~osmosis_ai.runs.result.Result`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from osmosis_ai.evaluation.journal import SetAside


@dataclass(frozen=True)
class Opened:
    """The run's work is known: ``rows`` of the file's ``rows_in_file``; ``planned`` items, of which
    ``remaining`` still run (a resumed run has the rest, ``failed`` of them failed and not run
    again); the journal, and any damaged one it set aside."""

    dataset: Path
    rows_in_file: int
    rows: int
    planned: int
    remaining: int
    failed: int
    journal: Path | None
    set_aside: SetAside | None


@dataclass(frozen=True)
class ModelChecked:
    """A model's preflight request is about to go out (``tag``: ``primary`` or ``baseline``)."""

    tag: str
    display_name: str


@dataclass(frozen=True)
class Ready:
    """The items are about to run: how the scoring functions run, and the backend's header line."""

    scoring: list[str]
    backend: str | None
