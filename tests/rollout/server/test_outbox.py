"""The outbox on a real SQLite file: what is committed survives a reopen, what is removed does not."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from osmosis_ai.rollout.server.outbox import Delivery, Outbox
from osmosis_ai.rollout.server.workers import adopt_left_outboxes, worker_outbox


def test_committed_rows_survive_a_reopen_and_acknowledged_ones_do_not(tmp_path: Path):
    path = tmp_path / "state" / "outbox.sqlite3"
    first = Outbox(path)
    first.put(Delivery("k1", "r1", "http://trainer", "cb-key", b'{"status": "COMPLETED"}'))
    first.put(Delivery("k2", "r2", "http://trainer", None, b"{}"))
    first.remove("k2")
    assert first.pending == 1
    assert first.get("k2") is None
    first.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # it holds callback keys
    second = Outbox(path)
    assert [(d.key, d.rollout_id, d.api_key, d.body) for d in second.all()] == [
        ("k1", "r1", "cb-key", b'{"status": "COMPLETED"}')
    ]
    assert second.pending == 1
    second.close()


def test_removed_rows_leave_the_file_at_once_and_a_fresh_put_replaces_the_old_row(tmp_path: Path):
    outbox = Outbox(tmp_path / "o.sqlite3")
    for index in range(3):
        outbox.put(Delivery(f"k{index}", f"r{index}", "http://t", None, b"{}"))
    for index in range(2):
        outbox.remove(f"k{index}")
    assert outbox.pending == 1
    assert [d.key for d in Outbox(tmp_path / "o.sqlite3").all()] == ["k2"]  # on disk already
    outbox.put(Delivery("k0", "r0-again", "http://t", None, b'{"again": true}'))  # a rollout started afresh
    outbox.put(Delivery("k2", "replaced", "http://t", None, b"{}"))
    assert outbox.pending == 2
    stored = outbox.get("k2")
    assert stored is not None and stored.rollout_id == "replaced"
    outbox.close()


def test_in_memory_outbox_and_pruning(tmp_path: Path):
    outbox = Outbox()
    assert not outbox.durable
    outbox.put(Delivery("old", "r", "http://t", None, b"{}"))
    assert outbox.prune(older_than_seconds=3600) == 0
    assert outbox.prune(older_than_seconds=-1) == 1
    assert outbox.pending == 0
    outbox.close()


def test_keys_not_stored_are_answered_without_changing_the_count(tmp_path: Path):
    path = tmp_path / "o.sqlite3"
    outbox = Outbox(path)
    outbox.put(Delivery("k1", "r1", "http://t", None, b"{}"))
    outbox.remove("never-stored")  # e.g. a callback delivered from memory after the disk failed
    assert outbox.get("never-stored") is None
    assert outbox.pending == 1
    outbox.close()
    reopened = Outbox(path)  # the stored keys are known again after a restart
    stored = reopened.get("k1")
    assert stored is not None and stored.rollout_id == "r1"
    reopened.remove("k1")
    assert reopened.get("k1") is None and reopened.pending == 0
    reopened.close()


def test_the_outboxes_of_workers_a_run_does_not_have_are_emptied_into_worker_0s(tmp_path: Path):
    path = str(tmp_path / "outbox.sqlite3")
    rows = {1: ("kept", 1.0), 2: ("k", 1.0), 10: ("k", 2.0), 11: ("old", 3.0)}
    for index, (key, created) in rows.items():
        left = Outbox(worker_outbox(path, index))
        left.put(Delivery(key, f"r-{index}", "http://trainer", None, b"{}", created))
        left.close()
    own = Outbox(path)
    own.put(Delivery("old", "r-own", "http://trainer", None, b"{}", 9.0))  # newer than worker 11's
    own.close()
    assert adopt_left_outboxes(path, 2) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outbox.sqlite3", "outbox.worker-1.sqlite3"]
    merged = Outbox(path)
    assert sorted((d.key, d.rollout_id) for d in merged.all()) == [("k", "r-10"), ("old", "r-own")]
    merged.close()
    assert adopt_left_outboxes(path, 1) == 1  # and back to one process
    assert adopt_left_outboxes(":memory:", 1) == 0
