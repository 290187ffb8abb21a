"""``--trajectories DIR`` of ``rollout run``, ``test`` and ``eval``: each finished item as an ATIF file.

The document is the library's (:func:`osmosis_ai.report.atif.trajectory_of`); this module only
puts it where the command line asked: ``DIR/<id>.json``, one per rollout (or test row, or eval
sample), written atomically as it finishes (:func:`~osmosis_ai.cli.output_file.write_output`).
Nothing is written anywhere else, and nothing without the flag. ``DIR`` is checked before any paid
work (an existing file is refused; a missing directory is made at the first write), and a file in it
that is one of the command's inputs (by a link, say) is refused rather than replaced.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import absolute_path
from osmosis_ai.cli.output_file import OutputPathError, declare_files, write_output

if TYPE_CHECKING:
    from osmosis_ai.cli.summary import Outputs
    from osmosis_ai.runs.result import Result

FLAG = "--trajectories"


def add_trajectories_argument(parser: argparse.ArgumentParser, *, unit: str) -> None:
    """``--trajectories DIR``; ``unit`` names what gets one file each ("rollout", "row", "run")."""
    parser.add_argument(
        FLAG,
        metavar="DIR",
        type=absolute_path,
        help=f"write each finished {unit} as an ATIF trajectory, DIR/<id>.json (osmosis report reads DIR)",
    )
    declare_files(parser, written=["trajectories"])


class TrajectoryWriter:
    """Writes the ATIF file of each finished item of a ``command`` into ``directory``; ``inputs`` are
    the command's input files, each with the label of its option."""

    def __init__(self, directory: str, inputs: Sequence[tuple[str, str]], *, command: str) -> None:
        self.directory = Path(directory)
        self.command = command
        self.count = 0
        self._counting = threading.Lock()  # files may be written from worker threads
        # The command's inputs by identity, so that no file written here replaces one.
        self._inputs: dict[tuple[int, int], str] = {}
        for path, label in inputs:
            try:
                found = os.stat(path)
            except OSError:
                continue
            self._inputs[(found.st_dev, found.st_ino)] = label

    def write_record(self, record: Mapping[str, Any], *, model: str | None = None) -> Path:
        """Write the trajectory of one finished item's record (from any thread); returns its path."""
        from osmosis_ai.report.atif import dumps, file_name, trajectory_of

        path = self.directory / file_name(record)
        try:
            found = os.stat(path)
        except OSError:
            found = None
        if found is not None and (label := self._inputs.get((found.st_dev, found.st_ino))) is not None:
            raise OutputPathError(path, FLAG, f"it is the file of {label}; choose another directory")
        write_output(path, dumps(trajectory_of(record, command=self.command, model=model)), flag=FLAG)
        with self._counting:
            self.count += 1
        return path

    def write_result(self, result: Result, *, model: str | None) -> Path | None:
        """Write the trajectory of a finished in-process item (``test``/``eval``): its record with
        the conversation it ended with. An item that stopped the run is not written: it runs again."""
        if result.attempt.systemic is not None:
            return None
        record = {**result.record(), "final_messages": result.attempt.final_messages,
                  "model_tag": result.item.model_tag}  # fmt: skip
        return self.write_record(record, model=model)


def trajectory_writer(outputs: Outputs, *, command: str) -> TrajectoryWriter | None:
    """The writer ``--trajectories`` asks for, if it was given."""
    if not outputs.trajectories:
        return None
    return TrajectoryWriter(outputs.trajectories, outputs.inputs, command=command)
