"""The journal: killed with SIGKILL at a random point, a rerun loses no finished sample and repeats none."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.journal import (
    Journal,
    JournalMismatchError,
    SampleRecord,
    file_digest,
    fingerprint,
)
from tests.support.cli import REPO, subprocess_env

ROWS, SAMPLES = 20, 3
KEYS = [(r, s) for r in range(ROWS) for s in range(SAMPLES)]
DESCRIPTION = {"model": "m", "dataset": "abc", "n": SAMPLES}

WORKER = """
import sys, time
from osmosis_ai.runs.journal import Journal, SampleRecord
from osmosis_ai.outcome import Outcome

keys = [(r, s) for r in range({rows}) for s in range({samples})]
with Journal.open(sys.argv[1], {description!r}) as journal:
    for r, s in journal.to_run(keys):
        time.sleep(0.002)  # the work of a sample
        journal.record(SampleRecord(r, s, Outcome.COMPLETED, {{"score": r * 10 + s}}))
        print(f"{{r}},{{s}}", flush=True)  # counted only once committed
"""


def _worker(path: Path) -> subprocess.Popen[str]:
    code = WORKER.format(rows=ROWS, samples=SAMPLES, description=DESCRIPTION)
    return subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=subprocess_env(),
    )


def _printed(lines: list[str]) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in (line.strip().split(",") for line in lines if line.strip())]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_killed_run_resumes_to_exactly_the_uninterrupted_result(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "journal.sqlite"
    kill_after = random.Random(seed).randrange(1, len(KEYS) - 1)
    first = _worker(path)
    assert first.stdout is not None
    counted = [first.stdout.readline() for _ in range(kill_after)]
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    counted_before = set(_printed(counted))
    with Journal.open(path, DESCRIPTION) as journal:
        kept = set(journal.records())
    assert counted_before <= kept  # nothing counted was lost
    second = _worker(path)
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0
    rerun = _printed(out.splitlines())
    assert not set(rerun) & kept and len(rerun) == len(set(rerun))  # nothing finished ran again
    with Journal.open(path, DESCRIPTION) as journal:
        records = journal.records()
    assert sorted(records) == KEYS
    assert {key: rec.data["score"] for key, rec in records.items()} == {(r, s): r * 10 + s for r, s in KEYS}


def test_infrastructure_failures_are_rerun_and_retry_failed_reruns_model_errors(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.sqlite", DESCRIPTION) as journal:
        for key, outcome in zip(
            KEYS[:4],
            [Outcome.COMPLETED, Outcome.INFRA_ERROR, Outcome.MODEL_ERROR, Outcome.TIMEOUT],
            strict=True,
        ):
            journal.record(SampleRecord(*key, outcome))
        assert journal.to_run(KEYS[:5]) == [KEYS[1], KEYS[3], KEYS[4]]
        assert journal.to_run(KEYS[:5], retry_failed=True) == [KEYS[1], KEYS[2], KEYS[3], KEYS[4]]
        journal.record(
            SampleRecord(*KEYS[1], Outcome.COMPLETED, {"again": True})
        )  # replaces, never duplicates
        assert len(journal.records()) == 4 and journal.records()[KEYS[1]].data == {"again": True}


def test_a_changed_configuration_is_refused_and_fresh_keeps_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with Journal.open(path, DESCRIPTION) as journal:
        journal.record(SampleRecord(0, 0, Outcome.COMPLETED))
    with pytest.raises(JournalMismatchError, match="dataset, model changed") as caught:
        Journal.open(path, {**DESCRIPTION, "model": "other", "dataset": "def"})
    assert caught.value.changed == ["dataset", "model"]
    with Journal.open(path, {**DESCRIPTION, "model": "other"}, fresh=True) as journal:
        assert journal.records() == {}
    (backup,) = tmp_path.glob("j.sqlite.*.bak")
    with Journal.open(backup, DESCRIPTION) as old:
        assert list(old.records()) == [(0, 0)]


def test_fingerprints(tmp_path: Path) -> None:
    assert (
        fingerprint({"a": 1, "b": [2]}) == fingerprint({"b": [2], "a": 1}) != fingerprint({"a": 2, "b": [2]})
    )
    data = tmp_path / "d.jsonl"
    data.write_text("x" * 3_000_000)
    before = file_digest(data, chunk_size=1 << 16)
    data.write_text("x" * 2_999_999 + "y")
    assert file_digest(data) != before


def test_model_tags_keep_their_own_samples_and_lines_go_beside_the_journal(tmp_path: Path) -> None:
    import asyncio

    from osmosis_ai.runs.journal import BASELINE, read_samples

    samples = tmp_path / "j.samples.jsonl"
    with Journal.open(tmp_path / "j.sqlite", DESCRIPTION, samples_path=samples) as journal:

        async def record_all() -> None:
            await asyncio.gather(*(
                journal.arecord(SampleRecord(r, 0, Outcome.COMPLETED, {"r": r}, tag, [{"role": "user", "content": str(r)}]))
                for r in range(5)
                for tag in ("primary", BASELINE)
            ))  # fmt: skip

        asyncio.run(record_all())
        assert sorted(journal.records()) == sorted(journal.records(BASELINE)) == [(r, 0) for r in range(5)]
        assert journal.to_run([(0, 0), (5, 0)], model_tag=BASELINE) == [(5, 0)]
    with samples.open("a") as handle:
        handle.write('{"row_index": 0, "run_index": 0, "model_tag": "primary", "messages": []}\n{"cut')
    lines = read_samples(samples)
    assert len(lines) == 10 and lines[0] == {"row_index": 0, "run_index": 0, "model_tag": "baseline",
                                            "messages": [{"role": "user", "content": "0"}]}  # fmt: skip
    assert lines[1]["messages"] == []  # the last line of a key wins


def test_records_are_read_a_page_at_a_time_in_key_order_and_finished_keys_in_step(tmp_path: Path) -> None:
    outcomes = {(0, 0): Outcome.COMPLETED, (0, 1): Outcome.TIMEOUT, (1, 0): Outcome.MODEL_ERROR,
                (2, 1): Outcome.AGENT_ERROR, (3, 0): Outcome.INFRA_ERROR}  # fmt: skip
    with Journal.open(tmp_path / "j.sqlite", DESCRIPTION) as journal:
        journal.record_many(
            [SampleRecord(r, s, o, {"key": [r, s]}) for (r, s), o in reversed(outcomes.items())]
        )
        assert [r.key for r in journal.iter_records(page=2)] == sorted(outcomes)
        assert [r.data["key"] for r in journal.iter_records(start=(0, 1), stop=(3, 0), page=1)] == [
            [0, 1], [1, 0], [2, 1]
        ]  # fmt: skip
        assert journal.outcomes(after=(1, 0), limit=1) == [((2, 1), Outcome.AGENT_ERROR)]
        keys = [(r, s) for r in range(4) for s in range(2)]
        for retry_failed in (False, True):
            finished = journal.finished_in_order(retry_failed=retry_failed)
            asked = [key for key in keys if finished(*key)]
            assert asked == sorted(set(keys) - set(journal.to_run(keys, retry_failed=retry_failed)))
        assert asked == [
            (0, 0),
            (2, 1),
        ]  # infrastructure failures always rerun; model errors with retry_failed


def test_a_journal_with_no_sample_is_claimed_by_the_next_configuration(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    Journal.open(path, DESCRIPTION).close()  # e.g. a run that failed at its preflight
    with Journal.open(path, {**DESCRIPTION, "base_url": "http://fixed"}) as journal:
        journal.record(SampleRecord(0, 0, Outcome.COMPLETED))
    with pytest.raises(JournalMismatchError, match="base_url changed"):
        Journal.open(path, DESCRIPTION)  # now it holds a sample: refused


def test_one_run_at_a_time_and_the_lock_goes_with_the_journal(tmp_path: Path) -> None:
    import os

    from osmosis_ai.runs.journal import JournalLockedError

    path = tmp_path / "j.sqlite"
    first = Journal.open(path, DESCRIPTION)
    with pytest.raises(JournalLockedError, match=rf"in use by another run \(pid {os.getpid()} on "):
        Journal.open(path, DESCRIPTION)
    first.close()
    first.close()  # idempotent
    Journal.open(path, DESCRIPTION).close()  # free again
    with pytest.raises(JournalMismatchError):
        with Journal.open(path, DESCRIPTION) as journal:
            journal.record(SampleRecord(0, 0, Outcome.COMPLETED))
        Journal.open(path, {**DESCRIPTION, "model": "other"})
    Journal.open(path, DESCRIPTION).close()  # a refused open released the lock it took
