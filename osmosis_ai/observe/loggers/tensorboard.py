"""TensorBoard event files, written with tensorboardX under ``TENSORBOARD_LOGDIR`` (default
``runs/<run name>``): each step's figures as scalars at their step, the finished run's figures as
scalars at step 0 (pass@k at step k too), the scores as a histogram, the config and the sample table
as text."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from osmosis_ai.observe.loggers import SAMPLE_COLUMNS, RunLog, writable_directory

STEP_FLUSH_S = 2


def _markdown(rows: list[list[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [
        "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in body
    ]
    return "\n".join(lines)


def check() -> str | None:
    """Why the event files could not be written (``TENSORBOARD_LOGDIR``, default ``runs/``), or ``None``."""
    return writable_directory(os.environ.get("TENSORBOARD_LOGDIR") or "runs")


class TensorBoardRun:
    """An open run: one event file directory; step figures as scalars at their step."""

    def __init__(self, name: str, kind: str, config: Mapping[str, Any]) -> None:
        from tensorboardX import SummaryWriter

        self.logdir = os.environ.get("TENSORBOARD_LOGDIR") or os.path.join("runs", name)
        # tensorboardX's writer thread writes what it is given and flushes the file every flush_secs:
        # a few seconds, so a TensorBoard watching a job sees each step soon after it ends.
        self.writer = SummaryWriter(logdir=self.logdir, flush_secs=STEP_FLUSH_S)
        table = [["setting", "value"], *([k, json.dumps(v, default=str)] for k, v in config.items())]
        self.writer.add_text("config", _markdown(table), 0)

    def step(self, step: int, figures: Mapping[str, float]) -> None:
        for name, value in figures.items():
            self.writer.add_scalar(name, value, step)

    def finish(self, run: RunLog) -> str:
        import numpy

        try:
            for name, value in run.summary.items():
                self.writer.add_scalar(f"summary/{name}", value, 0)
            for k, value in run.pass_at_k.items():
                self.writer.add_scalar("pass_at_k", value, k)
            if run.scores:
                self.writer.add_histogram("scores", numpy.asarray(run.scores, dtype=float), 0)
            table = [
                list(SAMPLE_COLUMNS),
                *([("" if c is None else str(c)) for c in row] for row in run.samples),
            ]
            self.writer.add_text("samples", _markdown(table), 0)
        finally:
            self.writer.close()
        return str(self.writer.logdir)

    def abort(self) -> None:
        self.writer.close()


def start(name: str, kind: str, config: Mapping[str, Any]) -> TensorBoardRun:
    return TensorBoardRun(name, kind, config)
