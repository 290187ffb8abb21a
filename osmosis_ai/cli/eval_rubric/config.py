"""Rubric config files (``rubric_configs.yaml``): parsing, defaults and validation.

A file holds one or more YAML documents. Document-level keys set defaults (``version``,
``default_model_info``, ``default_score_min``/``default_score_max``, ``default_system_prompt``,
``default_original_input``, ``default_ground_truth``). Any mapping with a string ``rubric`` key,
however deeply nested, is an entry; its label is the nearest enclosing key plus ``[i]`` per list
level (``rubrics[0]``), or ``document[<n>]`` for a bare document. Entries need ``id``, ``rubric``
and ``model_info`` (or the document default). A node reached again through a YAML alias is
walked (and listed) once, under its first label; a recursive alias is an error.

In *strict* mode (``eval-rubric``) an invalid entry (no ``id``/``rubric``/``model_info``, a bad
score bound, an ``extra_info`` key) is an error; in lenient mode (``preview``) it is skipped but
still listed. Errors that make the whole file meaningless (bad YAML, bad version, non-numeric or
non-finite default scores, ``default_extra_info``, duplicate ids) are errors in both modes.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.judge.rubric import RubricConfig

__all__ = ["RubricConfig", "RubricEntry", "RubricSuite", "load_rubric_suite"]

SUPPORTED_VERSION = 1
_TEXT_DEFAULTS = ("system_prompt", "original_input", "ground_truth")


@dataclass(frozen=True)
class RubricEntry:
    """A discovered entry as written in the file (for ``preview``), valid or not."""

    label: str
    raw: dict[str, Any]


@dataclass
class RubricSuite:
    """All rubric configs of one file."""

    source_path: Path
    version: int | None
    configs: list[RubricConfig] = field(default_factory=list)
    entries: list[RubricEntry] = field(default_factory=list)

    def get(self, rubric_id: str) -> RubricConfig | None:
        """The config whose id is exactly ``rubric_id``."""
        return next((config for config in self.configs if config.rubric_id == rubric_id), None)

    def available_ids(self) -> list[str]:
        """The ids declared in the file, sorted."""
        return sorted(config.rubric_id for config in self.configs)


def _check_bound(value: Any, what: str) -> None:
    """``CLIError`` unless ``value`` is null or a finite number (YAML ``.nan``/``.inf`` would make every score NaN)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CLIError(f"{what} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise CLIError(f"{what} must be a finite number, got {value!r}")


def _read_documents(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"Cannot read rubric config {path}: {exc}") from exc
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise CLIError(f"Invalid YAML in rubric config {path}{at}: {problem}") from exc
    except RecursionError:  # the YAML parser recurses per nesting level
        raise CLIError(f"Rubric config {path} is nested too deeply to read") from None


def _document_version(document: dict[str, Any], where: str) -> int | None:
    if "version" not in document or document["version"] is None:
        return None
    version = document["version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise CLIError(f"{where}: 'version' must be an integer, got {version!r}")
    if version < 0:
        raise CLIError(f"{where}: 'version' must not be negative, got {version}")
    if version != SUPPORTED_VERSION:
        raise CLIError(
            f"{where}: unsupported config version {version}; only version {SUPPORTED_VERSION} is supported"
        )
    return version


def _document_defaults(document: dict[str, Any], where: str) -> dict[str, Any]:
    if "default_extra_info" in document:
        raise CLIError(
            f"{where}: 'default_extra_info' is not supported; put context in the dataset's extra_info"
        )
    defaults: dict[str, Any] = {}
    for bound in ("score_min", "score_max"):
        value = document.get(f"default_{bound}")
        _check_bound(value, f"{where}: 'default_{bound}'")
        defaults[bound] = value
    model_info = document.get("default_model_info")
    defaults["model_info"] = model_info if isinstance(model_info, dict) else None
    for key in _TEXT_DEFAULTS:
        value = document.get(f"default_{key}")
        defaults[key] = value if isinstance(value, str) else None
    return defaults


def _children(node: dict[str, Any] | list[Any], label: str) -> list[tuple[Any, str]]:
    if isinstance(node, dict):
        return [(child, str(key)) for key, child in node.items()]
    return [(child, f"{label}[{index}]") for index, child in enumerate(node)]


def _walk(root: Any, label: str, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(label, entry)`` for every mapping with a string ``rubric`` under ``root``, in order.

    YAML aliases make the document a graph: a node reached again through an alias is not walked
    again (so "billion laughs" fan-out stays linear), and a node that contains itself is a
    ``CLIError``. The walk keeps its own stack, so deep nesting cannot exhaust Python's.
    """
    seen: set[int] = set()
    open_nodes: set[int] = set()  # the ancestors of the node being looked at
    stack: list[tuple[Any, str, bool]] = [(root, label, False)]
    while stack:
        node, name, leaving = stack.pop()
        if leaving:
            open_nodes.discard(id(node))
            continue
        if not isinstance(node, (dict, list)):
            continue
        if id(node) in open_nodes:
            raise CLIError(
                f"{where}: '{name}' refers back to a node that contains it (a recursive YAML alias); remove the recursion"
            )
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict) and isinstance(node.get("rubric"), str):
            yield name, node
            continue
        open_nodes.add(id(node))
        stack.append((node, name, True))
        stack.extend((child, child_label, False) for child, child_label in reversed(_children(node, name)))


def _entry_config(entry: dict[str, Any], defaults: dict[str, Any], source_label: str) -> RubricConfig:
    """Validate one entry; raises ``CLIError`` naming the entry when it is unusable."""
    if "extra_info" in entry:
        raise CLIError(f"{source_label}: 'extra_info' is not supported in rubric configs")
    rubric_id = entry.get("id")
    if not isinstance(rubric_id, str) or not rubric_id.strip():
        raise CLIError(f"{source_label}: entry needs a non-empty string 'id'")
    rubric_text = entry.get("rubric")
    if not isinstance(rubric_text, str) or not rubric_text.strip():
        raise CLIError(f"{source_label}: entry '{rubric_id.strip()}' needs a non-empty 'rubric'")
    model_info = entry.get("model_info", defaults["model_info"])
    if not isinstance(model_info, dict):
        raise CLIError(f"{source_label}: entry '{rubric_id.strip()}' needs a 'model_info' mapping")
    bounds = {}
    for bound in ("score_min", "score_max"):
        value = entry.get(bound)
        _check_bound(value, f"{source_label}: '{bound}'")
        value = defaults[bound] if value is None else value
        bounds[bound] = None if value is None else float(value)
    texts = {}
    for key in _TEXT_DEFAULTS:
        value = entry.get(key)
        texts[key] = value if isinstance(value, str) else defaults[key]
    return RubricConfig(
        rubric_id=rubric_id.strip(),
        rubric_text=rubric_text,
        model_info=copy.deepcopy(model_info),
        score_min=bounds["score_min"],
        score_max=bounds["score_max"],
        system_prompt=texts["system_prompt"],
        original_input=texts["original_input"],
        ground_truth=texts["ground_truth"],
        source_label=source_label,
    )


def load_rubric_suite(path: Path, *, strict: bool) -> RubricSuite:
    """Parse the rubric config file at ``path``; see the module docstring for the rules."""
    suite = RubricSuite(source_path=path, version=None)
    seen_ids: dict[str, str] = {}
    for index, document in enumerate(_read_documents(path)):
        where = f"{path} (document {index + 1})"
        defaults = (
            _document_defaults(document, where)
            if isinstance(document, dict)
            else _document_defaults({}, where)
        )
        if isinstance(document, dict):
            version = _document_version(document, where)
            if version is not None and suite.version is not None and version != suite.version:
                raise CLIError(
                    f"{path}: documents declare different versions ({suite.version} and {version})"
                )
            suite.version = suite.version if version is None else version
        if isinstance(document, dict) and "rubrics" in document and not isinstance(document["rubrics"], list):
            raise CLIError(
                f"{where}: 'rubrics' must be a list of rubric entries, got {type(document['rubrics']).__name__}"
            )
        for label, entry in _walk(document, f"document[{index}]", where):
            suite.entries.append(RubricEntry(label, entry))
            source_label = f"{path}:{label}"
            try:
                config = _entry_config(entry, defaults, source_label)
            except CLIError:
                if strict:
                    raise
                continue
            if config.rubric_id in seen_ids:
                raise CLIError(
                    f"Duplicate rubric id '{config.rubric_id}' in {path} "
                    f"(at {seen_ids[config.rubric_id]} and {label}); ids must be unique"
                )
            seen_ids[config.rubric_id] = label
            suite.configs.append(config)
    if not suite.entries or (strict and not suite.configs):
        raise CLIError(
            f"No rubric entries found in {path}; an entry is a mapping with 'id', 'rubric' and 'model_info'"
        )
    return suite
