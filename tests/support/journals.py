"""Reading a run's journal back in the tests that compare two runs of one command."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any


def journalled(path: Path) -> list[tuple[Any, ...]]:
    """Every record of the journal at ``path`` (row, sample, model tag, outcome, data), in key order."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute(
            "SELECT row_index, sample_index, model_tag, outcome, data FROM samples ORDER BY 1, 2, 3"
        ).fetchall()


def untimed(value: Any) -> Any:
    """``value`` without its timing fields (``*duration_ms``, latency figures)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith("duration_ms")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value
