"""Datasets the command tests write: one row per mode, each telling a test agent what to do."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path


def mode_rows(path: Path, modes: Iterable[str], *, ground_truth: str = "2") -> Path:
    """Write one row per mode to ``path`` (JSONL: ``user_prompt`` ``q<i>``, the row's ``mode``); return it."""
    rows = [
        {"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": ground_truth, "mode": mode}
        for i, mode in enumerate(modes)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
