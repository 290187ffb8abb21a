"""Legacy import path of the JSONL record helpers, over :mod:`osmosis_ai.cli.eval_rubric.dataset`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from osmosis_ai.cli.eval_rubric.dataset import load_json_objects
from osmosis_ai.cli.eval_rubric.preview import json_blocks

__all__ = ["load_jsonl_records", "render_json_records"]


def load_jsonl_records(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file as an object (the command line's error, with the line number, otherwise)."""
    return load_json_objects(Path(path))


def render_json_records(records: list[dict[str, Any]]) -> str:
    """``JSONL record #i`` and the record as indented JSON, for each record."""
    return "\n".join(json_blocks(records))
