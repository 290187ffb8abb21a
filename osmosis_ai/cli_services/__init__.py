"""Legacy import path of the rubric tools' services: the parts that keep their 0.2 meaning (the error,
the config reader, the JSONL helpers). The evaluation session, engine and report classes are
``osmosis eval-rubric`` itself (docs/compatibility.md)."""

from __future__ import annotations

from osmosis_ai.cli_services.config import (
    ParsedItem,
    RubricConfig,
    RubricSuite,
    discover_rubric_config_path,
    load_rubric_configs,
    load_rubric_suite,
    render_yaml_items,
)
from osmosis_ai.cli_services.dataset import load_jsonl_records, render_json_records
from osmosis_ai.cli_services.errors import CLIError

__all__ = [
    "CLIError",
    "ParsedItem",
    "RubricConfig",
    "RubricSuite",
    "discover_rubric_config_path",
    "load_jsonl_records",
    "load_rubric_configs",
    "load_rubric_suite",
    "render_json_records",
    "render_yaml_items",
]
