"""The rubric tools' services that keep their 0.2 meaning (``osmosis_ai.cli_services`` and its
``config`` and ``dataset`` modules), over the rubric config reader and dataset reader of
``osmosis eval-rubric``. They are command-line services, as 0.2's were, and raise the command line's
:class:`~osmosis_ai.cli.errors.CLIError` as 0.2's did; the alias table (:mod:`osmosis_ai._compat`)
serves them at 0.2's paths.

0.2's config parser was pluggable per document version (:class:`RubricConfigParser` with a
``schemas`` mapping); with its default schemas it is the live reader itself. A schema of the
caller's own parses each document through :meth:`RubricConfigDocumentSchema.parse_document`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.eval_rubric import config as _config
from osmosis_ai.cli.eval_rubric import dataset as _dataset
from osmosis_ai.cli.eval_rubric.config import RubricConfig, RubricEntry, RubricSuite
from osmosis_ai.cli.eval_rubric.dataset import load_json_objects
from osmosis_ai.cli.eval_rubric.preview import json_blocks, yaml_blocks
from osmosis_ai.cli.eval_rubric.session import locate_config
from osmosis_ai.judge.rubric import PREVIEW_LIMIT, preview_text

__all__ = [
    "BaseRubricConfigSchema",
    "DatasetLoader",
    "DatasetRecord",
    "ParsedItem",
    "RubricConfigDocumentResult",
    "RubricConfigDocumentSchema",
    "RubricConfigParser",
    "Version1RubricConfigSchema",
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


@dataclass(frozen=True)
class RubricConfigDocumentResult:
    """What one YAML document of a rubric config file holds: its valid configs by id, and every entry."""

    configs: dict[str, RubricConfig]
    items: list[ParsedItem]


class RubricConfigDocumentSchema:
    """How to read one document of a rubric config file declaring ``version`` (``None``: no version)."""

    version: int | None = None

    def parse_document(
        self, document: Any, *, path: Path, doc_index: int, strict: bool
    ) -> RubricConfigDocumentResult:
        """The configs and entries of ``document``, the ``doc_index``-th (0-based) of ``path``."""
        raise NotImplementedError


class BaseRubricConfigSchema(RubricConfigDocumentSchema):
    """The rules of ``osmosis eval-rubric`` (see :mod:`osmosis_ai.cli.eval_rubric.config`) for one document."""

    def parse_document(
        self, document: Any, *, path: Path, doc_index: int, strict: bool
    ) -> RubricConfigDocumentResult:
        where = f"{path} (document {doc_index + 1})"
        defaults = _config._document_defaults(document if isinstance(document, dict) else {}, where)
        configs: dict[str, RubricConfig] = {}
        items: list[ParsedItem] = []
        for label, entry in _config._walk(document, f"document[{doc_index}]", where):
            items.append(ParsedItem(label, entry))
            try:
                config = _config._entry_config(entry, defaults, f"{path}:{label}")
            except CLIError:
                if strict:
                    raise
                continue
            if config.rubric_id in configs:
                raise CLIError(f"Duplicate rubric id '{config.rubric_id}' in {path}; ids must be unique")
            configs[config.rubric_id] = config
        return RubricConfigDocumentResult(configs, items)


class Version1RubricConfigSchema(BaseRubricConfigSchema):
    """Documents declaring ``version: 1``."""

    version: int | None = 1


class RubricConfigParser:
    """Reads a rubric config file into a :class:`RubricSuite` and its entries as written.

    ``schemas`` maps a document version (``None``: documents without one) to the schema that reads
    it; ``None`` must be among them. Without ``schemas``, the file is read by the live reader.
    """

    def __init__(self, *, schemas: dict[int | None, RubricConfigDocumentSchema] | None = None) -> None:
        if schemas is not None and None not in schemas:
            raise ValueError("schemas needs a schema for documents without a version (the key None)")
        self.schemas = schemas

    def parse(self, path: Path, *, strict: bool = True) -> tuple[RubricSuite, list[ParsedItem]]:
        """The suite of ``path`` and every entry in it; ``strict=False`` skips invalid entries."""
        path = Path(path)
        if self.schemas is None:
            suite = _config.load_rubric_suite(path, strict=strict)
            return suite, [ParsedItem(entry.label, entry.raw) for entry in suite.entries]
        documents = [(index, doc) for index, doc in enumerate(_config._read_documents(path)) if doc]
        versions = {v for index, doc in documents if (v := self._version(doc, path, index)) is not None}
        if len(versions) > 1:
            raise CLIError(f"{path}: documents declare different versions ({sorted(versions)})")
        version = versions.pop() if versions else None
        if version not in self.schemas:
            raise CLIError(f"{path}: unsupported config version {version}")
        schema = self.schemas[version]
        suite = RubricSuite(source_path=path, version=version)
        items: list[ParsedItem] = []
        for index, document in documents:
            result = schema.parse_document(document, path=path, doc_index=index, strict=strict)
            items.extend(result.items)
            suite.entries.extend(
                RubricEntry(item.label or "", item.payload)
                for item in result.items
                if isinstance(item.payload, dict)
            )
            for rubric_id, config in result.configs.items():
                if suite.get(rubric_id) is not None:
                    raise CLIError(f"Duplicate rubric id '{rubric_id}' in {path}; ids must be unique")
                suite.configs.append(config)
        if strict and not suite.configs:
            raise CLIError(f"No rubric entries found in {path}")
        return suite, items

    @staticmethod
    def _version(document: Any, path: Path, index: int) -> int | None:
        version = document.get("version") if isinstance(document, dict) else None
        if version is None:
            return None
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise CLIError(
                f"{path} (document {index + 1}): 'version' must be a non-negative integer, got {version!r}"
            )
        return version


@dataclass(frozen=True)
class DatasetRecord:
    """One line of a rubric dataset, as 0.2's ``eval-rubric`` read it; ``payload`` is the object as written."""

    payload: dict[str, Any]
    rubric_id: str
    conversation_id: str | None
    record_id: str | None
    solution_str: str
    ground_truth: str | None
    original_input: str | None
    metadata: dict[str, Any] | None
    extra_info: dict[str, Any] | None
    score_min: float | None
    score_max: float | None

    def merged_extra_info(self) -> dict[str, Any] | None:
        """A copy of ``extra_info`` with ``metadata`` under ``dataset_metadata`` (unless already set); ``None`` if empty."""
        merged = copy.deepcopy(self.extra_info) if self.extra_info else {}
        if self.metadata:
            merged.setdefault("dataset_metadata", copy.deepcopy(self.metadata))
        return merged or None

    def assistant_preview(self, *, max_length: int = PREVIEW_LIMIT) -> str | None:
        """``solution_str`` on one line, cut to ``max_length`` characters; ``None`` when it is blank."""
        return preview_text(self.solution_str, max_length) or None

    def conversation_label(self, fallback_index: int) -> str:
        """``conversation_id``, else ``record[<fallback_index>]``."""
        return self.conversation_id or f"record[{fallback_index}]"

    def record_identifier(self, conversation_label: str) -> str:
        """``record_id``, else the payload's ``id`` as text, else ``conversation_label``."""
        if self.record_id:
            return self.record_id
        raw_id = self.payload.get("id")
        if isinstance(raw_id, str) and raw_id.strip():
            return raw_id.strip()
        return conversation_label if raw_id is None else str(raw_id)


class DatasetLoader:
    """Reads a rubric dataset into :class:`DatasetRecord` objects, every line checked."""

    def load(self, path: Path) -> list[DatasetRecord]:
        """Every record of ``path`` (``CLIError`` naming the line of the first bad one, or an empty file)."""
        path = Path(path)
        records = [
            _dataset_record(_dataset._record(line, payload, path))
            for line, payload in _dataset._objects(path)
        ]
        if not records:
            raise CLIError(f"No JSON records found in {path}")
        return records


def _stripped(value: str | None) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _dataset_record(record: _dataset.RubricRecord) -> DatasetRecord:
    raw_id = record.payload.get("id")
    original_input = record.original_input
    if original_input is None and record.extra_info is not None:
        # 0.2 took the candidate's prompt from extra_info when the record had none of its own
        fallback = record.extra_info.get("original_input")
        original_input = fallback if isinstance(fallback, str) else None
    return DatasetRecord(
        payload=record.payload,
        rubric_id=record.rubric_id.strip(),
        conversation_id=_stripped(record.conversation_id),
        record_id=raw_id.strip() if isinstance(raw_id, str) else None,
        solution_str=record.solution_str,
        ground_truth=record.ground_truth,
        original_input=original_input,
        metadata=record.metadata,
        extra_info=record.extra_info,
        score_min=record.score_min,
        score_max=record.score_max,
    )
