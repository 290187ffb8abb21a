"""Where ``osmosis eval`` keeps its journals, and finding or removing them (``osmosis eval cache``).

The root is ``$OSMOSIS_CACHE_DIR/eval``, else ``$XDG_CACHE_HOME/osmosis/eval``, else
``~/.cache/osmosis/eval``. Each configuration's journal is
``<root>/<model>/<dataset stem>/<task id>.sqlite`` (path parts made safe by :func:`safe_path_part`),
with its samples file ``<task id>.samples.jsonl`` beside it.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path

from osmosis_ai.runs.journal import Journal, JournalInfo

JOURNAL_SUFFIX = ".sqlite"
SAMPLES_SUFFIX = ".samples.jsonl"
_UNSAFE = re.compile(r"[^\w-]+")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"{d}{i}" for d in ("COM", "LPT") for i in range(10)}


def journal_root() -> Path:
    """The directory that holds every journal (see the module docstring)."""
    if os.environ.get("OSMOSIS_CACHE_DIR"):
        return Path(os.environ["OSMOSIS_CACHE_DIR"]).expanduser().resolve() / "eval"
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser().resolve() / "osmosis" / "eval"
    return Path.home() / ".cache" / "osmosis" / "eval"


def safe_path_part(text: str, max_len: int = 60) -> str:
    """``text`` as one lower-case file-name part that is valid on every OS (letters of any script kept)."""
    decomposed = unicodedata.normalize("NFD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    part = _UNSAFE.sub("-", plain).strip("-").lower()
    part = re.sub(r"-{2,}", "-", part)
    digest = sha256(text.encode("utf-8")).hexdigest()
    if not part:
        return f"eval-{digest[:8]}"
    if part.upper() in _WINDOWS_RESERVED:
        part = f"_{part}"
    if len(part) > max_len:
        part = f"{part[: max_len - 5]}_{digest[:4]}"
    return part


def journal_path(root: Path, model: str, dataset: str | Path, task_id: str) -> Path:
    """The journal of one configuration under ``root``."""
    return root / safe_path_part(model) / safe_path_part(Path(dataset).stem) / f"{task_id}{JOURNAL_SUFFIX}"


def samples_path(journal: Path) -> Path:
    """The samples file kept beside ``journal``."""
    return journal.with_name(journal.name.removesuffix(JOURNAL_SUFFIX) + SAMPLES_SUFFIX)


@dataclass(frozen=True)
class Entry:
    """A journal found under the root: its task id and what it recorded."""

    task_id: str
    info: JournalInfo

    @property
    def model(self) -> str:
        return str(self.info.labels.get("model", ""))

    @property
    def dataset(self) -> str:
        return str(self.info.labels.get("dataset", ""))

    def matches(self, *, model: str | None, dataset: str | None, status: str | None) -> bool:
        """Filters as ``cache ls`` takes them: case-insensitive substrings, the exact status."""
        return (
            (model is None or model.lower() in self.model.lower())
            and (dataset is None or dataset.lower() in self.dataset.lower())
            and (status is None or status == self.info.status)
        )


def entries(root: Path) -> Iterator[Entry]:
    """Every journal under ``root`` (backups and files that are not journals skipped), newest first."""
    if not root.is_dir():
        return iter(())
    found = []
    for path in root.rglob(f"*{JOURNAL_SUFFIX}"):
        if path.name.startswith("."):
            continue
        info = Journal.inspect(path)
        if info is not None:
            found.append(Entry(path.name.removesuffix(JOURNAL_SUFFIX), info))
    return iter(sorted(found, key=lambda e: e.info.created_at, reverse=True))


def remove(journal: Path, root: Path) -> None:
    """Delete the journal at ``journal`` with its write-ahead log, lock and samples file, then its
    directories under ``root`` if left empty."""
    for path in (journal, *(journal.with_name(journal.name + suffix) for suffix in ("-wal", "-shm", ".lock")),
                 samples_path(journal)):  # fmt: skip
        path.unlink(missing_ok=True)
    parent = journal.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()
        except OSError:  # not empty: other journals or backups live there
            break
        parent = parent.parent
