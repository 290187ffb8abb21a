"""``osmosis preview``: show what a rubric config or a dataset file contains, as the tools read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval_rubric.config import load_rubric_suite
from osmosis_ai.cli.eval_rubric.dataset import load_json_objects

CONFIG_SUFFIXES = (".yaml", ".yml")
DATASET_SUFFIXES = (".jsonl",)


class _BlockDumper(yaml.SafeDumper):
    """Safe YAML that writes multi-line strings as ``|`` blocks, the way people write rubrics."""


def _represent_text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_text)


def _yaml(value: Any) -> str:
    return yaml.dump(value, Dumper=_BlockDumper, sort_keys=False, indent=2, allow_unicode=True).rstrip("\n")


def yaml_blocks(items: list[tuple[str | None, Any]], heading: str) -> list[str]:
    """``heading #i (label)`` and the item as YAML, for each ``(label, item)``, blank-line separated."""
    lines: list[str] = []
    for index, (label, item) in enumerate(items, start=1):
        lines += ([""] if lines else []) + [
            f"{heading} #{index}" + (f" ({label})" if label else ""),
            _yaml(item),
        ]
    return lines


def json_blocks(records: list[Any], heading: str = "JSONL record") -> list[str]:
    """``heading #i`` and the record as indented JSON, for each record, blank-line separated."""
    lines: list[str] = []
    for index, record in enumerate(records, start=1):
        lines += ([""] if lines else []) + [
            f"{heading} #{index}",
            json.dumps(record, indent=2, ensure_ascii=False),
        ]
    return lines


def _config_preview(path: Path) -> list[str]:
    suite = load_rubric_suite(path, strict=False)
    blocks = yaml_blocks([(entry.label, entry.raw) for entry in suite.entries], "Rubric config")
    return [f"Loaded {len(suite.entries)} rubric config(s) from {path}", *([""] if blocks else []), *blocks]


def _dataset_preview(path: Path) -> list[str]:
    records = load_json_objects(path)
    blocks = json_blocks(records)
    return [f"Loaded {len(records)} JSONL record(s) from {path}", *([""] if blocks else []), *blocks]


def _checked(path: Path) -> tuple[Path, str]:
    """``path`` (``~`` expanded) and its kind, ``"rubric_configs"`` or ``"jsonl_records"``."""
    path = path.expanduser()
    if not path.exists():
        raise CLIError(f"Path {path} does not exist")
    if path.is_dir():
        raise CLIError(f"Path {path} is a directory; expected a file")
    suffix = path.suffix.lower()
    if suffix in CONFIG_SUFFIXES:
        return path, "rubric_configs"
    if suffix in DATASET_SUFFIXES:
        return path, "jsonl_records"
    accepted = ", ".join(CONFIG_SUFFIXES + DATASET_SUFFIXES)
    raise CLIError(f"Unsupported file type '{path.suffix or '(none)'}' for {path}; accepted: {accepted}")


def render_preview(path: Path) -> list[str]:
    """The lines ``osmosis preview -p PATH`` prints; ``CLIError`` for a missing or unknown file."""
    path, kind = _checked(path)
    return _config_preview(path) if kind == "rubric_configs" else _dataset_preview(path)


def preview_object(path: Path) -> dict[str, Any]:
    """What ``osmosis preview -p PATH --json`` prints: the file, its kind and its entries as read."""
    path, kind = _checked(path)
    if kind == "rubric_configs":
        suite = load_rubric_suite(path, strict=False)
        items = [{"label": entry.label, "config": entry.raw} for entry in suite.entries]
    else:
        items = load_json_objects(path)
    return {"path": str(path), "kind": kind, "count": len(items), "items": items}
