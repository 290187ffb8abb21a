"""What a run tells its caller as it goes (:func:`osmosis_ai.runs.run.run`'s ``on_event``), besides
each :class:`~osmosis_ai.runs.result.Result`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Union

from osmosis_ai.outcome import OutcomeCounts

if TYPE_CHECKING:
    from osmosis_ai.runs.journal import SampleRecord, SetAside
    from osmosis_ai.runs.result import Result


@dataclass(frozen=True)
class Opened:
    """The run's work is known: ``rows`` of the file's ``rows_in_file``; ``planned`` items, of which
    ``remaining`` still run (a resumed run has the rest: ``failed`` of them failed and run again
    with ``--retry-failed``, ``kept`` failed and are never run again but with ``--fresh``); the journal, any damaged one it set aside, and ``journaled(start, stop)``, which reads
    the journal's records between two keys a page at a time (for a caller that streams them)."""

    dataset: Path
    rows_in_file: int
    rows: int
    planned: int
    remaining: int
    failed: int
    journal: Path | None
    set_aside: SetAside | None
    in_flight: int
    """The most items that run at once."""
    journaled: Callable[..., Iterator[SampleRecord]] | None = None
    kept: OutcomeCounts = field(default_factory=OutcomeCounts)


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


@dataclass(frozen=True)
class ItemsDone:
    """No item is left running (each finished, or the run stopped); the journal is still open, so
    a caller streaming its records can finish with them now."""


Event = Union[Opened, ModelChecked, Ready, ItemsDone, "Result"]
OnEvent = Callable[[Event], Awaitable[None] | None]


async def tell(on_event: OnEvent, event: Event) -> None:
    """Hand ``event`` to ``on_event``, awaited when it returns an awaitable."""
    done = on_event(event)
    if done is not None:
        await done
