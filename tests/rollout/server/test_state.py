"""AppState bookkeeping: ordered completion, TTL pruning that stops early, a hard cap on finished records."""

from __future__ import annotations

import pytest

from osmosis_ai.rollout.server.state import AppState, RolloutRecord


def _finish(state: AppState, key: str) -> RolloutRecord:
    record = RolloutRecord(key, f"id-{key}")
    record.tools = []
    state.add(record)
    state.mark_completed(record)
    return record


def test_prune_drops_only_expired_records_in_completion_order():
    state = AppState(record_ttl_seconds=10)
    old, fresh = _finish(state, "old"), _finish(state, "fresh")
    old.completed_at -= 60
    assert state.prune() == 1
    assert list(state.completed) == ["fresh"]
    assert state.lookup("fresh") is fresh
    assert state.completed_rollouts == {"fresh": fresh.completed_at}


def test_finished_records_are_capped_and_keep_only_what_duplicates_need(caplog):
    state = AppState(max_completed_records=3)
    for key in "abcde":
        _finish(state, key)
    assert list(state.completed) == ["c", "d", "e"]
    assert caplog.text.count("forgetting the oldest early") == 1
    record = state.completed["e"]
    assert (record.task, record.ready, record.rollout_id, record.tools) == (None, None, "id-e", [])


@pytest.mark.parametrize(
    "kwargs", [{"max_concurrent": 0}, {"record_ttl_seconds": -5}, {"max_completed_records": 0}]
)
def test_non_positive_limits_are_rejected(kwargs):
    with pytest.raises(ValueError, match="positive"):
        AppState(**kwargs)


def test_counters_and_snapshots():
    state = AppState(max_concurrent=4, agent_loop_name="x")
    state.add(RolloutRecord("k", "k"))
    assert (state.active_count, state.queued_count, state.completed_count, state.max_concurrent) == (
        1,
        1,
        0,
        4,
    )
    assert state.rollout_tasks == {}
    assert state.is_duplicate("k") and not state.is_duplicate("other")


def test_rollout_tasks_and_completed_rollouts_are_live_read_only_views():
    state = AppState()
    record = RolloutRecord("k", "k")
    state.add(record)
    tasks, completed = state.rollout_tasks, state.completed_rollouts
    assert dict(tasks) == {} and "k" not in tasks  # accepted, its task not started yet
    state.mark_completed(record)
    assert completed["k"] == record.completed_at and len(completed) == 1 and list(completed) == ["k"]
    for view in (tasks, completed):
        with pytest.raises(TypeError):
            view["x"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            del view["k"]  # type: ignore[attr-defined]
    assert "k" in state.completed_rollouts
