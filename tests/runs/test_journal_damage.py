"""A journal that cannot be read is set aside (renamed, kept) and the run starts over; ``fresh`` works on
any file; a journal that cannot be written fails at open; a torn samples line stays alone."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.journal import (
    Journal,
    JournalCorruptError,
    JournalError,
    SampleRecord,
    read_samples,
)

DESCRIPTION = {"model": "m", "dataset": "abc", "n": 1}


def _good(path: Path) -> Path:
    with Journal.open(path, DESCRIPTION) as journal:
        for row in range(40):
            journal.record(SampleRecord(row, 0, Outcome.COMPLETED, {"score": row, "pad": "x" * 500}))
    return path


def _sql(*statements: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            for statement in statements:
                db.execute(statement)

    return damage


def _bytes(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(change(path.read_bytes()))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "not a database": (lambda path: path.write_bytes(b"hello world " * 400), "file is not a database"),
    "truncated": (_bytes(lambda data: data[:8192]), "malformed"),
    "a zeroed page": (_bytes(lambda data: data[:8192] + bytes(4096) + data[12288:]), "damaged database"),
    "another program's database": (_sql("DROP TABLE samples", "DROP TABLE meta", "CREATE TABLE users (id)"),
                                   "its tables are not a journal's: users(id)"),
    "a table with other columns": (_sql("DROP TABLE samples", "CREATE TABLE samples (a, b)"),
                                   "its tables are not a journal's: meta(key, value), samples(a, b)"),
    "a description that is not JSON": (_sql("UPDATE meta SET value = '{' WHERE key = 'description'",
                                            "UPDATE meta SET value = 'x' WHERE key = 'fingerprint'"),
                                       "its description is not JSON"),
    "an unknown outcome": (_sql("UPDATE samples SET outcome = 'bogus' WHERE row_index = 7"),
                           "row 7, sample 0 has the unknown outcome 'bogus'"),
}  # fmt: skip


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_journal_is_kept_aside_and_a_new_one_started(tmp_path: Path, kind: str) -> None:
    damage, reason = DAMAGE[kind]
    path = _good(tmp_path / "journal.sqlite")
    damage(path)
    damaged = path.read_bytes()
    journal = Journal.open(path, DESCRIPTION)
    with journal:
        assert journal.set_aside is not None and reason in journal.set_aside.reason
        kept = journal.set_aside.kept
        assert kept.name.startswith("journal.sqlite.") and kept.name.endswith(".corrupt")
        assert kept.read_bytes() == damaged  # kept as it was
        assert journal.to_run([(0, 0)]) == [(0, 0)]  # a new journal: everything runs
        journal.record(SampleRecord(0, 0, Outcome.COMPLETED, {"score": 1}))
    line = journal.set_aside.describe()
    assert line == f"the journal {path} could not be read ({journal.set_aside.reason}); it is kept as {kept} " \
        "and the run starts over"  # fmt: skip
    assert "\n" not in line
    with Journal.open(path, DESCRIPTION) as again:  # the new one is a journal like any other
        assert again.set_aside is None and list(again.records()) == [(0, 0)]


@pytest.mark.parametrize("kind", DAMAGE)
def test_fresh_moves_any_file_aside(tmp_path: Path, kind: str) -> None:
    path = _good(tmp_path / "journal.sqlite")
    DAMAGE[kind][0](path)
    with Journal.open(path, DESCRIPTION, fresh=True) as journal:
        assert journal.set_aside is None and journal.to_run([(0, 0)]) == [(0, 0)]
    moved = [p.name for p in tmp_path.glob("journal.sqlite.*") if not p.name.endswith(".lock")]
    assert len(moved) == 1 and moved[0].endswith(".bak")


def test_two_set_asides_in_one_second_keep_both(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    for _ in range(2):
        path.write_bytes(b"garbage" * 100)
        Journal.open(path, DESCRIPTION).close()
    assert len(list(tmp_path.glob("journal.sqlite.*.corrupt"))) == 2


def test_a_sample_unreadable_later_is_one_line_naming_fresh(tmp_path: Path) -> None:
    path = _good(tmp_path / "journal.sqlite")
    with Journal.open(path, DESCRIPTION) as journal:
        _sql("UPDATE samples SET data = '{' WHERE row_index = 3")(path)
        with pytest.raises(JournalCorruptError) as caught:
            journal.records()
    message = str(caught.value)
    assert message.startswith(f"the journal {path} cannot be read at row 3, sample 0 (")
    assert message.endswith("run again with --fresh to set it aside and start over") and "\n" not in message


@pytest.fixture
def immutable() -> Iterator[Callable[[Path], None]]:
    """``chattr +i`` (even root cannot write such a file), undone at the end."""
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr to make a file read-only for root too")
    made: list[Path] = []

    def freeze(path: Path) -> None:
        result = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"chattr +i is not possible here: {result.stderr.strip()}")
        made.append(path)

    yield freeze
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_a_journal_that_cannot_be_written_fails_at_open(
    tmp_path: Path, immutable: Callable[[Path], None]
) -> None:
    path = _good(tmp_path / "journal.sqlite")
    immutable(path)
    with pytest.raises(
        JournalError, match=r"cannot open the journal .*: attempt to write a readonly database"
    ):
        Journal.open(path, DESCRIPTION)


def test_a_torn_samples_line_does_not_swallow_the_next(tmp_path: Path) -> None:
    samples = tmp_path / "journal.samples.jsonl"
    line = {"row_index": 0, "run_index": 0, "model_tag": "primary", "messages": [{"role": "user"}]}
    samples.write_text(
        json.dumps(line) + "\n" + json.dumps({**line, "row_index": 1})[:25]
    )  # a crash mid-line
    with Journal.open(tmp_path / "journal.sqlite", DESCRIPTION, samples_path=samples) as journal:
        journal.record(SampleRecord(1, 0, Outcome.COMPLETED, {}, messages=[{"role": "assistant"}]))
    assert [(s["row_index"], s["messages"]) for s in read_samples(samples)] == [
        (0, [{"role": "user"}]),
        (1, [{"role": "assistant"}]),
    ]
