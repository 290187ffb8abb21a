"""TensorBoard event files, written with tensorboardX under ``TENSORBOARD_LOGDIR`` (default
``runs/<run name>``): the figures as scalars at step 0 (pass@k at step k too), the scores as a
histogram, the config and the sample table as text."""

from __future__ import annotations

import json
import os

from osmosis_ai.observe.loggers import SAMPLE_COLUMNS, RunLog, writable_directory


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


def log(run: RunLog) -> str:
    import numpy
    from tensorboardX import SummaryWriter

    logdir = os.environ.get("TENSORBOARD_LOGDIR") or os.path.join("runs", run.name)
    writer = SummaryWriter(logdir=logdir)
    try:
        config = [["setting", "value"], *([k, json.dumps(v, default=str)] for k, v in run.config.items())]
        writer.add_text("config", _markdown(config), 0)
        for name, value in run.summary.items():
            writer.add_scalar(f"summary/{name}", value, 0)
        for k, value in run.pass_at_k.items():
            writer.add_scalar("pass_at_k", value, k)
        if run.scores:
            writer.add_histogram("scores", numpy.asarray(run.scores, dtype=float), 0)
        table = [list(SAMPLE_COLUMNS), *([("" if c is None else str(c)) for c in row] for row in run.samples)]
        writer.add_text("samples", _markdown(table), 0)
    finally:
        writer.close()
    return str(writer.logdir)
