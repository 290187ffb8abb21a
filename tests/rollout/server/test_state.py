"""AppState bookkeeping: ordered completion, TTL pruning that stops early, a hard cap on finished records,
and the key-based methods that code driving an AppState by hand calls."""

from __future__ import annotations

import asyncio
import time

import pytest

from osmosis_ai.rollout.core.schemas import InitResponse
from osmosis_ai.rollout.server.state import AppState, RolloutRecord


def _finish(state: AppState, key: str) -> RolloutRecord:
    record = RolloutRecord(key, f"id-{key}")
    record.tools = []
    state.add(record)
    state.finish(record)
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
    state.finish(record)
    assert completed["k"] == record.completed_at and len(completed) == 1 and list(completed) == ["k"]
    for view in (tasks, completed):
        with pytest.raises(TypeError):
            view["x"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            del view["k"]  # type: ignore[attr-defined]
    assert "k" in state.completed_rollouts


async def test_key_based_bookkeeping_tracks_a_rollout_from_start_to_finish():
    state = AppState()
    release = asyncio.Event()

    async def rollout() -> None:
        await release.wait()

    task = asyncio.get_running_loop().create_task(rollout())
    state.mark_started(key="r1", task=task)
    assert state.rollout_tasks == {"r1": task}
    assert state.is_duplicate(key="r1") and not state.is_duplicate(key="r2")
    assert (state.active_count, state.completed_count) == (1, 0)
    release.set()
    await task
    state.mark_completed(key="r1")
    assert dict(state.rollout_tasks) == {} and list(state.completed_rollouts) == ["r1"]
    assert state.is_duplicate("r1") and (state.active_count, state.completed_count) == (0, 1)


async def test_mark_started_attaches_the_task_to_a_record_the_server_accepted():
    state = AppState()
    record = RolloutRecord("key", "rollout-7")
    state.add(record)
    task = asyncio.get_running_loop().create_task(asyncio.sleep(0))
    state.mark_started("key", task)
    assert state.lookup("key") is record and record.task is task
    await task
    state.mark_completed("key")
    assert state.completed["key"] is record and record.rollout_id == "rollout-7"


async def test_init_future_is_shared_by_duplicates_and_cleared_after_a_failed_init():
    state = AppState()
    leader, created = state.get_or_create_init_future(key="k")
    follower, again = state.get_or_create_init_future(key="k")
    assert created and not again and follower is leader
    assert state.is_duplicate("k")
    answer = InitResponse(rollout_id="k", tools=[])
    leader.set_result(answer)
    assert await follower is answer

    state.clear_init_record(key="k")
    assert not state.is_duplicate("k")
    retry, created = state.get_or_create_init_future("k")
    assert created and retry is not leader


async def test_init_futures_are_pruned_with_their_finished_records():
    state = AppState(record_ttl_seconds=10)
    future, _ = state.get_or_create_init_future("k")
    future.set_result(InitResponse(rollout_id="k", tools=[]))
    state.mark_completed("k")
    assert state.prune(now=time.monotonic() + 60) == 1
    assert not state.is_duplicate("k")
    assert state.get_or_create_init_future("k")[1]
