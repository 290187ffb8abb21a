"""Where journals live, their safe path parts, and finding and removing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.journal import Journal, SampleRecord
from osmosis_ai.runs.journal_store import entries, journal_path, journal_root, remove, safe_path_part


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("openai/gpt-4o-mini", "openai-gpt-4o-mini"),
        ("Café  Données", "cafe-donnees"),
        ("数据集", "数据集"),
        ("con", "_con"),
        ("///", None),
    ],
)
def test_safe_path_part(text: str, part: str | None) -> None:
    made = safe_path_part(text)
    if part is None:
        assert made.startswith("eval-") and len(made) == 13
    else:
        assert made == part
    long = safe_path_part("x" * 100)
    assert len(long) == 60 and long.startswith("x" * 55 + "_")


def test_the_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OSMOSIS_CACHE_DIR", str(tmp_path))
    assert journal_root() == tmp_path.resolve() / "eval"
    monkeypatch.delenv("OSMOSIS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert journal_root() == (tmp_path / "xdg").resolve() / "osmosis" / "eval"


def test_entries_and_remove(tmp_path: Path) -> None:
    root = tmp_path / "eval"
    path = journal_path(root, "m", "data/set.jsonl", "abc123")
    assert path == root / "m" / "set" / "abc123.sqlite"
    with Journal.open(path, {"x": 1}, labels={"model": "m", "dataset": "data/set.jsonl"}) as journal:
        journal.record(SampleRecord(0, 0, Outcome.COMPLETED))
    (root / "m" / "set" / "notes.sqlite").write_text("not a journal")
    (found,) = entries(root)
    assert (found.task_id, found.model, found.info.runs, found.info.status) == (
        "abc123",
        "m",
        1,
        "in_progress",
    )
    assert found.matches(model="M", dataset="SET", status=None) and not found.matches(model=None, dataset=None,
                                                                                      status="completed")  # fmt: skip
    remove(found.info.path, root)
    assert not path.exists() and (root / "m" / "set").exists()  # the other file keeps its directory
