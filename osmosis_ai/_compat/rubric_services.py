"""The rubric tools' services that keep their 0.2 meaning (``osmosis_ai.cli_services`` and its
``config`` and ``dataset`` modules), over the rubric config reader and JSONL helpers of
``osmosis eval-rubric``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_ai.cli.eval_rubric import config as _config
from osmosis_ai.cli.eval_rubric.config import RubricSuite
from osmosis_ai.cli.eval_rubric.dataset import load_json_objects
from osmosis_ai.cli.eval_rubric.preview import json_blocks, yaml_blocks
from osmosis_ai.cli.eval_rubric.session import locate_config

__all__ = [
    "ParsedItem",
    "discover_rubric_config_path",
    "load_jsonl_records",
    "load_rubric_configs",
    "load_rubric_suite",
    "render_json_records",
    "render_yaml_items",
]


@dataclass(frozen=True)
class ParsedItem:
    """A rubric entry as written in the file, valid or not, and where it was found."""

    label: str | None
    payload: Any


def load_rubric_suite(path: Path) -> RubricSuite:
    """The rubric configs of ``path``, every entry checked (the command line's error on the first bad one)."""
    return _config.load_rubric_suite(Path(path), strict=True)


def load_rubric_configs(path: Path) -> list[ParsedItem]:
    """Every rubric entry of ``path`` as written, invalid ones included (what ``preview`` shows)."""
    suite = _config.load_rubric_suite(Path(path), strict=False)
    return [ParsedItem(entry.label, entry.raw) for entry in suite.entries]


def discover_rubric_config_path(config_arg: str | None, data_path: Path) -> Path:
    """``config_arg`` if given, else the first ``rubric_configs.yaml`` next to the data, in the
    working directory or in ``./examples``."""
    return locate_config(Path(config_arg).expanduser() if config_arg else None, Path(data_path))


def render_yaml_items(items: Sequence[ParsedItem], label: str) -> str:
    """``label #i (item label)`` and the entry as YAML, for each item."""
    return "\n".join(yaml_blocks([(item.label, item.payload) for item in items], label))


def load_jsonl_records(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file as an object (the command line's error, with the line number, otherwise)."""
    return load_json_objects(Path(path))


def render_json_records(records: list[dict[str, Any]]) -> str:
    """``JSONL record #i`` and the record as indented JSON, for each record."""
    return "\n".join(json_blocks(records))
