"""AdaptiveLimit: how it follows simulated servers (deterministic: simulated time, seeded latencies),
its slots on a real event loop, the server metrics it reads, the record it keeps, and the factory
from a command-line value. Properties are asserted (bounds, windows of convergence), not trajectories.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable

import pytest

from benchmarks.adaptive_concurrency import drive
from benchmarks.capacity_server import CapacityServer, capacity_server
from osmosis_ai._http import shared_pool
from osmosis_ai._pool import FixedLimit, Limit, run_bounded
from osmosis_ai.models.concurrency import (
    GROW_BELOW,
    MAX_BATCH,
    MAX_PAUSE,
    STALE_AFTER,
    TRIM_ABOVE,
    AdaptiveLimit,
    CallObserver,
    CallOutcome,
    LimitChange,
    LimitHistory,
    ServerLoad,
    concurrency_limit,
    metrics_url_for,
    observer_of,
    outcome_for_status,
    parse_server_metrics,
)
from tests.support.simulated_server import Simulation


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def serve(limit: AdaptiveLimit, clock: Clock, latency: float, rounds: int) -> None:
    """``rounds`` times: fill every slot, let ``latency`` pass, answer them all successfully."""
    for _ in range(rounds):
        taken = 0
        while limit.try_acquire():
            taken += 1
        clock.now += latency
        for _ in range(taken):
            limit.observe(CallOutcome.SUCCESS, latency)
            limit.release()


def follow(limit: AdaptiveLimit, clock: Clock, latency_of: Callable[[int], float], rounds: int) -> list[int]:
    """``rounds`` times :func:`serve` one round at the latency ``latency_of`` the slots taken; the limits."""
    limits = []
    for _ in range(rounds):
        serve(limit, clock, latency_of(limit.limit), rounds=1)
        limits.append(limit.limit)
    return limits


def settles(sim: Simulation, seconds: float = 60, share: float = 0.95) -> None:
    """Run ``seconds`` more and check the server was kept busy and never refused: the limit at least
    90% of its capacity and below twice it, where it refuses; ``share`` of the full rate served."""
    served = sim.run_for(seconds)
    limits = sim.limits_between(sim.now - seconds, sim.now)
    assert 0.9 * sim.capacity <= min(limits) and max(limits) < 2 * sim.capacity, limits
    assert served.refused == 0 and served.failed == 0
    assert served.completed >= share * sim.full_rate(seconds)


def reasons(limit: AdaptiveLimit) -> list[str]:
    return [change.reason for change in limit.history]


# -- following a simulated server ------------------------------------------------------------------


@pytest.mark.parametrize(("capacity", "seed"), [(4, 1), (32, 1), (32, 2), (32, 3), (128, 1)])
def test_it_converges_between_the_capacity_and_where_the_server_refuses(capacity: int, seed: int) -> None:
    sim = Simulation(capacity=capacity, seed=seed)
    sim.run_for(60)
    settles(sim)


def test_refusals_of_requests_sent_together_cut_once() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=20, clock=clock)
    while limit.try_acquire():
        pass
    clock.now += 0.5
    for _ in range(20):  # the whole round in flight comes back refused
        limit.observe(CallOutcome.REFUSED, 0.5)
        limit.release()
    assert limit.limit == 14 and reasons(limit).count("refused") == 1
    assert limit.try_acquire()  # successes may still flow: no pause on a first refusal
    clock.now += 0.5
    limit.observe(CallOutcome.REFUSED, 0.5)  # sent after the cut: news, cut again
    assert limit.limit == 9


def test_slow_start_ends_before_the_server_refuses() -> None:
    sim = Simulation(capacity=100)
    assert sim.run_for(60).refused == 0
    assert max(sim.limits_between(0, 60)) < 200


def test_a_burst_of_429s_backs_it_off_and_it_comes_back() -> None:
    sim = Simulation(capacity=32)
    sim.run_for(60)
    before = sim.limit.limit
    sim.refuse_everything = True
    sim.run_for(3)  # three latencies of refusals, each request refused at once
    assert sim.limit.limit <= 0.7 * before
    sim.refuse_everything = False
    sim.run_for(60)
    settles(sim, 30)


def test_it_recovers_when_the_capacity_halves() -> None:
    sim = Simulation(capacity=64)
    sim.run_for(60)
    assert min(sim.limits_between(40, 60)) >= 64
    sim.capacity = 32
    sim.run_for(10)  # ten latencies to settle
    settles(sim)


def test_it_recovers_when_the_capacity_doubles() -> None:
    sim = Simulation(capacity=32)
    sim.run_for(60)
    assert max(sim.limits_between(40, 60)) < 64
    sim.capacity = 64
    sim.run_for(30)
    settles(sim)


def test_sustained_429s_with_long_hints_never_freeze_it() -> None:
    # The shape that froze another controller: every request refused, each with an 89 s hint.
    sim = Simulation(capacity=32, retry_after=89.0)
    sim.run_for(60)
    sim.refuse_everything = True
    started = sim.now
    for _ in range(5):  # ten minutes of nothing but 429s: it keeps asking, and keeps backing off
        assert sim.run_for(120).refused > 0
    assert sim.limit.limit == sim.limit.minimum
    refusals = [at for at, outcome in sim.answers if outcome is CallOutcome.REFUSED and at >= started]
    assert max(later - earlier for earlier, later in itertools.pairwise(refusals)) <= MAX_PAUSE + 5
    sim.refuse_everything = False
    stopped = sim.now
    sim.run_for(120)
    first_success = next(at for at, outcome in sim.answers if outcome is CallOutcome.SUCCESS and at > stopped)
    assert first_success - refusals[-1] <= MAX_PAUSE + 5  # no hint held it longer than it may
    settles(sim)


def test_latency_that_rises_without_a_queue_is_taken_as_the_new_floor() -> None:
    sim = Simulation(capacity=32)
    sim.run_for(60)
    sim.slowdown = 2.0  # every request takes twice as long: slower work, not a longer queue
    sim.run_for(60)
    settles(sim)


def test_widely_spread_latencies_still_converge() -> None:
    sim = Simulation(capacity=32, jitter=0.8)  # service times from 0.2 to 1.8 latencies
    sim.run_for(120)
    settles(sim, share=0.9)


def test_timeouts_back_it_off() -> None:
    sim = Simulation(
        capacity=16, refuse_past=None, timeout=2.5, limit=lambda clock: AdaptiveLimit(initial=64, clock=clock)
    )
    sim.run_for(60)
    assert "timeout" in reasons(sim.limit)
    settles(sim)


def test_it_does_not_grow_past_the_work_there_is() -> None:
    # Five clients never use more than five slots: growing further would mean nothing until a
    # burst came and found the limit far above what the server was ever seen to take.
    sim = Simulation(capacity=32, workers=5)
    sim.run_for(120)
    assert max(sim.limits_between(0, 120)) <= 16


@pytest.mark.parametrize(("capacity", "minimum", "maximum"), [(1000, 1, 16), (1, 4, 64), (32, 8, 40)])
def test_it_stays_within_its_bounds(capacity: int, minimum: int, maximum: int) -> None:
    sim = Simulation(
        capacity=capacity, limit=lambda clock: AdaptiveLimit(minimum=minimum, maximum=maximum, clock=clock)
    )
    sim.run_for(120)
    limits = sim.limits_between(0, 120)
    assert minimum <= min(limits) and max(limits) <= maximum
    if capacity == 1000:
        assert limits[-1] == maximum
    if capacity == 1:
        assert limits[-1] == minimum


# -- latency that rises with the batch ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "slowdown", "seed"), [(32, 0.5, 1), (32, 0.5, 2), (32, 0.5, 3), (128, 0.5, 1), (128, 1.0, 1)]
)
def test_a_server_that_slows_with_its_batch_and_never_refuses_is_kept_full(
    capacity: int, slowdown: float, seed: int
) -> None:
    # A continuous-batching server: latency rises with the batch well before any queue, and nothing
    # is refused, so latency is the only sign of the capacity.
    sim = Simulation(capacity=capacity, batch_slowdown=slowdown, refuse_past=None, seed=seed)
    sim.run_for(60)
    settles(sim)


def test_latency_rising_much_less_than_the_slots_lets_it_grow_past_the_thresholds() -> None:
    capacity = 32

    def batching(slots: int) -> float:  # a full batch 1.5x slower, a queue past the capacity
        return (1 + 0.5 * (min(slots, capacity) - 1) / capacity) * max(1.0, slots / capacity)

    clock = Clock()
    limit = AdaptiveLimit(clock=clock)
    limits = follow(limit, clock, batching, rounds=40)
    assert batching(limits[-1]) / batching(8) > GROW_BELOW  # past where latency alone stops growth
    assert all(capacity <= level < 2 * capacity for level in limits[-20:]), limits


def test_a_step_across_the_capacity_is_not_taken_for_the_batch() -> None:
    # Doubling from 64 to 128 against a capacity of 100: latency rose only 28% for twice the slots,
    # yet the slots past 100 queue. A probe further up shows it, and the limit goes back.
    clock = Clock()
    limit = AdaptiveLimit(initial=64, clock=clock)
    limits = follow(limit, clock, lambda slots: max(1.0, slots / 100), rounds=20)
    assert max(limits) < 200 and limits[-1] == 128, limits
    assert reasons(limit).count("probe") == 2  # up 25%, and back


def test_latency_the_batch_explains_is_bounded() -> None:
    # A server whose latency keeps rising slower than the slots, never queueing: the batch it is
    # taken for has a bound, so latency does too.
    clock = Clock()
    limit = AdaptiveLimit(clock=clock)
    limits = follow(limit, clock, lambda slots: slots**0.3, rounds=60)
    assert limits[-1] < limit.maximum
    assert limits[-1] ** 0.3 / 8**0.3 <= MAX_BATCH * TRIM_ABOVE, limits


def test_a_probe_never_goes_where_the_server_refused() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=16, clock=clock)
    serve(limit, clock, 1.0, rounds=1)  # the floor; slow start doubles
    limit.observe(CallOutcome.REFUSED, 0.1)  # refused at 32
    assert limit.limit == 22
    limits = follow(limit, clock, lambda slots: 1.0 if slots < 26 else 1.4, rounds=10)
    assert limits[-1] > 26  # grown back, held between the thresholds where a probe would pass 32
    assert "probe" not in reasons(limit) and max(limits) < 32, limits


def test_latency_that_rises_without_a_queue_on_a_batching_server_is_taken_as_the_new_floor() -> None:
    sim = Simulation(capacity=32, batch_slowdown=0.5, refuse_past=None)
    sim.run_for(60)
    sim.slowdown = 2.0
    sim.run_for(60)
    settles(sim)


# -- Retry-After -----------------------------------------------------------------------------------


def test_a_retry_after_holds_growth_until_it_has_passed() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=10, clock=clock)
    serve(limit, clock, 1.0, rounds=3)
    assert limit.limit > 10  # slow start
    before = limit.limit
    limit.observe(CallOutcome.REFUSED, 0.01, retry_after=20.0)
    cut = limit.limit
    assert cut < before
    serve(limit, clock, 1.0, rounds=10)  # ten quiet latencies inside the hint: admitted, never grown
    assert limit.limit == cut
    clock.now += 20
    serve(limit, clock, 1.0, rounds=10)
    assert limit.limit > cut


def test_refused_again_with_nothing_served_it_admits_nothing_until_the_hint_passes() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=8, clock=clock)
    assert limit.try_acquire()
    limit.observe(CallOutcome.REFUSED, 0.01, retry_after=5.0)  # the first refusal cuts only
    assert limit.try_acquire()
    clock.now += 0.1
    limit.observe(CallOutcome.REFUSED, 0.01, retry_after=5.0)  # refused again, nothing got through
    refused_at = clock.now
    limit.release()
    limit.release()
    while clock.now < refused_at + 5.0:
        assert not limit.try_acquire()
        clock.now += 0.5
    assert limit.try_acquire()


def test_a_refusal_that_comes_back_before_any_answer_could_does_not_pause_it() -> None:
    # Refusals come back at once, answers after a latency: a second refusal sooner than that after
    # a cut says nothing about whether the server still serves anyone.
    clock = Clock()
    limit = AdaptiveLimit(initial=8, clock=clock)
    serve(limit, clock, 1.0, rounds=2)  # a floor of about one second
    limit.observe(CallOutcome.REFUSED, 0.001, retry_after=5.0)
    clock.now += 0.1
    limit.observe(CallOutcome.REFUSED, 0.001, retry_after=5.0)
    assert limit.try_acquire()
    limit.release()
    clock.now += 1.5
    limit.observe(CallOutcome.REFUSED, 0.001, retry_after=5.0)  # still nothing served, a latency on
    assert not limit.try_acquire()


def test_a_hint_never_holds_admissions_longer_than_the_cap_nor_is_stretched_by_old_news() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=8, clock=clock)
    limit.observe(CallOutcome.REFUSED, 0.01, retry_after=3600.0)
    limit.observe(CallOutcome.REFUSED, 0.0, retry_after=3600.0)
    paused_at = clock.now
    clock.now += 30
    # A refusal of a request sent before that cut says nothing new: it does not move the horizon.
    limit.observe(CallOutcome.REFUSED, 31.0, retry_after=3600.0)
    clock.now = paused_at + MAX_PAUSE - 0.1
    assert not limit.try_acquire()
    clock.now = paused_at + MAX_PAUSE
    assert limit.try_acquire()


async def test_acquire_waits_out_a_pause_on_the_event_loop() -> None:
    loop = asyncio.get_running_loop()
    limit = AdaptiveLimit(initial=4, clock=loop.time)
    limit.observe(CallOutcome.REFUSED, 0.0, retry_after=0.05)
    limit.observe(CallOutcome.REFUSED, 0.0, retry_after=0.05)
    pause_ends = loop.time() + 0.05 - 0.001
    await asyncio.wait_for(limit.acquire(), 10)
    assert loop.time() >= pause_ends  # granted only once the hint had passed
    limit.release()


# -- slots on the event loop -----------------------------------------------------------------------


async def test_a_cut_keeps_new_work_out_until_the_slots_held_are_below_it() -> None:
    limit = AdaptiveLimit(initial=4)
    for _ in range(4):
        await limit.acquire()
    waiter = asyncio.create_task(limit.acquire())
    await asyncio.sleep(0)
    limit.observe(CallOutcome.REFUSED, 0.0)  # 4 -> 2 while 4 are held
    assert limit.limit == 2
    limit.release()
    limit.release()
    await asyncio.sleep(0)
    assert not waiter.done() and limit.in_flight == 2
    limit.release()
    await asyncio.wait_for(waiter, 10)
    assert limit.in_flight == 2


async def test_a_cancelled_waiter_leaks_no_slot() -> None:
    limit = AdaptiveLimit(initial=1)
    await limit.acquire()
    waiter = asyncio.create_task(limit.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    limit.release()
    assert limit.in_flight == 0
    await asyncio.wait_for(limit.acquire(), 10)
    assert limit.in_flight == 1


async def test_run_bounded_never_starts_work_past_the_limit_as_it_changes() -> None:
    limit = AdaptiveLimit(initial=8, maximum=32)
    running = 0
    over: list[tuple[int, int]] = []

    async def work(item: int) -> None:
        nonlocal running
        running += 1
        if running > limit.limit and item % 7:  # started past the limit (the cut below may land later)
            over.append((running, limit.limit))
        await asyncio.sleep(0)
        limit.observe(CallOutcome.REFUSED if item % 50 == 0 else CallOutcome.SUCCESS, 0.0)
        await asyncio.sleep(0)
        running -= 1

    assert await run_bounded(range(500), work, concurrency=limit) == 500
    assert limit.in_flight == 0 and reasons(limit).count("refused") >= 1
    assert all(held <= limit.ceiling for held, _ in over)


# -- end to end, over real sockets -----------------------------------------------------------------


async def test_end_to_end_it_backs_off_a_real_server_and_reads_its_metrics() -> None:
    server = CapacityServer(4, latency=0.02, retry_after=0.05)
    async with capacity_server(server) as base_url:
        limit = AdaptiveLimit(initial=32, metrics_url=metrics_url_for(base_url))  # far past 2 x 4
        run = await drive(base_url, limit, "auto", 2.0, shared_pool())
    summary = limit.summary()
    assert server.stats.refused > 0 and summary["requests"]["refused"] == server.stats.refused
    assert summary["changes"]["refused"] >= 1 and summary["lowest"] <= 8  # backed off from 32
    assert limit.limit <= 8  # where it ended, the server no longer refuses
    assert run.completed > 0 and summary["requests"]["success"] == server.stats.served
    assert summary["metrics"]["readings"] >= 1


async def test_end_to_end_a_server_without_metrics_is_asked_once() -> None:
    server = CapacityServer(4, latency=0.01, metrics=False)
    async with capacity_server(server) as base_url:
        limit = AdaptiveLimit(metrics_url=metrics_url_for(base_url))
        await drive(base_url, limit, "auto", 1.5, shared_pool())
    summary = limit.summary()
    assert summary["metrics"] == {"readings": 0, "state": f"{metrics_url_for(base_url)} answered 404"}
    assert summary["requests"]["success"] == server.stats.served > 0


# -- server metrics --------------------------------------------------------------------------------


def test_rising_preemptions_trim_it() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=20, clock=clock)
    limit.observe_metrics(ServerLoad(waiting=0, running=20, kv_usage=0.5, preemptions=10))
    assert limit.limit == 20
    clock.now += 1
    limit.observe_metrics(ServerLoad(waiting=0, running=20, kv_usage=0.5, preemptions=12))
    assert limit.limit < 20 and reasons(limit)[-1] == "preemption"
    clock.now += 1
    trimmed = limit.limit
    limit.observe_metrics(ServerLoad(waiting=0, running=20, kv_usage=0.5, preemptions=3))  # restarted
    assert limit.limit == trimmed


def test_a_queue_in_the_server_trims_it_even_while_latency_looks_fine() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=16, clock=clock)
    serve(limit, clock, 1.0, rounds=1)
    level = limit.limit
    limit.observe_metrics(
        ServerLoad(waiting=40, running=20, kv_usage=0.9)
    )  # three in the server per one served
    serve(limit, clock, 1.0, rounds=1)
    assert limit.limit < level and reasons(limit).count("queue") == 1
    serve(limit, clock, 1.0, rounds=3)  # the same reading justifies no second trim
    assert reasons(limit).count("queue") == 1


def test_stale_metrics_are_ignored() -> None:
    clock = Clock()
    fresh = AdaptiveLimit(initial=8, clock=clock)
    stale = AdaptiveLimit(initial=8, clock=clock)
    busy = ServerLoad(waiting=100, running=10, kv_usage=0.99)
    stale.observe_metrics(busy)
    clock.now += STALE_AFTER + 1
    fresh.observe_metrics(busy)
    serve(fresh, clock, 1.0, rounds=4)
    serve(stale, clock, 1.0, rounds=4)
    assert fresh.limit <= 8 and "grow" not in reasons(fresh)
    assert stale.limit > 8 and reasons(stale).count("grow") >= 2


def test_with_room_in_the_server_latency_may_rise_further() -> None:
    # Batching: the server reports no queue and cache to spare while latency rises with the batch.
    clock = Clock()
    roomy, blind = AdaptiveLimit(initial=16, clock=clock), AdaptiveLimit(initial=16, clock=clock)
    for limit in (roomy, blind):
        serve(limit, clock, 1.0, rounds=1)
        assert limit.limit == 32
    for _ in range(3):
        roomy.observe_metrics(ServerLoad(waiting=0, running=roomy.in_flight, kv_usage=0.3))
        serve(roomy, clock, 1.8, rounds=1)
        serve(blind, clock, 1.8, rounds=1)
    assert roomy.limit > 32 > blind.limit
    assert "latency" not in reasons(roomy) and "latency" in reasons(blind)


def test_a_nearly_full_cache_with_nobody_waiting_still_takes_more() -> None:
    # The server admits while it has cache for it; a queue, not the cache's fill, says it is full.
    clock = Clock()
    limit = AdaptiveLimit(initial=15, clock=clock)
    for _ in range(3):
        limit.observe_metrics(ServerLoad(waiting=0, running=limit.limit, kv_usage=0.94))
        serve(limit, clock, 1.0, rounds=1)
    assert limit.limit > 15


def test_a_full_cache_leaves_no_room_for_latency_to_rise() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=16, clock=clock)
    serve(limit, clock, 1.0, rounds=1)
    limit.observe_metrics(ServerLoad(waiting=0, running=limit.in_flight, kv_usage=0.95))
    serve(limit, clock, 1.8, rounds=1)
    assert limit.limit < 32 and reasons(limit)[-1] == "latency"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reading_a_simulated_servers_metrics_it_settles_and_recovers_when_the_capacity_halves(
    seed: int,
) -> None:
    sim = Simulation(capacity=64, metrics_every=1.0, seed=seed)
    sim.run_for(60)
    settles(sim)
    sim.capacity = 32
    sim.run_for(10)
    settles(sim)


VLLM_PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 12.0
vllm:num_requests_running{engine="1",model_name="qwen"} 8.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
vllm:num_requests_waiting{engine="1",model_name="qwen"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.77
vllm:num_preemptions_total{engine="0",model_name="qwen"} 5.0
vllm:num_preemptions_total{engine="1",model_name="qwen"} 2.0
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="qwen"} 0.0
vllm:num_requests_waiting{model_name="weird"} not-a-number
process_cpu_seconds_total 12.5
"""

SGLANG_PAGE = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="llama"} 30
sglang:num_queue_reqs{model_name="llama"} 7
sglang:token_usage{model_name="llama"} 0.28
sglang:num_retracted_requests_total{model_name="llama"} 4
"""


def test_vllm_and_sglang_metrics_pages_are_read() -> None:
    assert parse_server_metrics(VLLM_PAGE) == ServerLoad(
        waiting=4.0, running=20.0, kv_usage=0.77, preemptions=7.0
    )
    assert parse_server_metrics(SGLANG_PAGE) == ServerLoad(
        waiting=7.0, running=30.0, kv_usage=0.28, preemptions=4.0
    )
    old_vllm = "vllm:gpu_cache_usage_perc 0.5\nvllm:num_requests_waiting 0\n"
    assert parse_server_metrics(old_vllm) == ServerLoad(waiting=0.0, kv_usage=0.5)
    assert parse_server_metrics("process_cpu_seconds_total 1.0\n# HELP x\n") is None
    assert parse_server_metrics("<html>not found</html>") is None


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://gpu:8000/v1", "http://gpu:8000/metrics"),
        ("http://gpu:8000/v1/", "http://gpu:8000/metrics"),
        ("http://gpu:30000", "http://gpu:30000/metrics"),
        ("https://proxy.example/team/v1?key=1", "https://proxy.example/team/metrics"),
    ],
)
def test_the_metrics_page_is_beside_v1(base_url: str, expected: str) -> None:
    assert metrics_url_for(base_url) == expected


# -- outcomes, the record, the factory -------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, CallOutcome.SUCCESS),
        (429, CallOutcome.REFUSED),
        (503, CallOutcome.REFUSED),
        (504, CallOutcome.TIMEOUT),
        (408, CallOutcome.TIMEOUT),
        (500, CallOutcome.ERROR),
        (400, CallOutcome.ERROR),
    ],
)
def test_an_http_status_is_an_outcome(status: int, outcome: CallOutcome) -> None:
    assert outcome_for_status(status) is outcome


def test_errors_that_say_nothing_about_capacity_change_nothing() -> None:
    clock = Clock()
    limit = AdaptiveLimit(initial=8, clock=clock)
    for _ in range(100):
        limit.observe(CallOutcome.ERROR, 0.5)
    assert limit.limit == 8 and limit.summary()["requests"]["error"] == 100


def test_the_history_stays_bounded_and_spans_the_run() -> None:
    history = LimitHistory(capacity=8)
    for step in range(1000):
        history.record(LimitChange(float(step), step, "grow"))
    changes = list(history)
    assert len(changes) <= 8
    assert changes[0].at == 0.0 and changes[-1].at == 999.0
    assert [c.at for c in changes] == sorted(c.at for c in changes)


def test_the_summary_is_json_and_bounded_over_a_long_run() -> None:
    sim = Simulation(capacity=16, limit=lambda clock: AdaptiveLimit(clock=clock, history_capacity=16))
    for capacity in (16, 4, 64, 8, 32) * 4:
        sim.capacity = capacity
        sim.run_for(30)
    summary = json.loads(json.dumps(sim.limit.summary()))
    assert len(summary["history"]) <= 16 and summary["history"][0][2] == "start"
    assert summary["mode"] == "auto" and summary["minimum"] == 1 and summary["maximum"] == 256
    assert summary["lowest"] <= summary["mean"] <= summary["highest"]
    assert summary["changes"]["grow"] >= 1 and summary["requests"]["success"] > 0
    assert summary["metrics"] == {"readings": 0, "state": "no metrics URL"}


@pytest.mark.parametrize("value", ["32", 32, " 32 "])
def test_a_number_means_a_fixed_limit(value: str | int) -> None:
    limit = concurrency_limit(value)
    assert isinstance(limit, FixedLimit) and limit.ceiling == 32
    assert observer_of(limit) is None and observer_of(32) is None


def test_auto_means_an_adaptive_limit_that_observes() -> None:
    limit = concurrency_limit("auto", maximum=64, base_url="http://gpu:8000/v1")
    assert isinstance(limit, AdaptiveLimit) and isinstance(limit, Limit) and isinstance(limit, CallObserver)
    assert limit.ceiling == 64 and limit.metrics_url == "http://gpu:8000/metrics"
    assert observer_of(limit) is limit
    default = concurrency_limit("AUTO")
    assert isinstance(default, AdaptiveLimit) and default.ceiling == 256 and default.metrics_url is None


@pytest.mark.parametrize("value", ["0", "-3", "2.5", "many", "", True, 0, -1])
def test_a_value_that_is_neither_auto_nor_a_whole_number_is_refused(value: str | int) -> None:
    with pytest.raises(ValueError, match="concurrency must be 'auto' or a whole number of at least 1"):
        concurrency_limit(value)


def test_a_fixed_number_above_the_maximum_is_refused() -> None:
    with pytest.raises(ValueError, match="a concurrency of 64 is above the maximum concurrency of 32"):
        concurrency_limit("64", maximum=32)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"minimum": 0}, "the minimum concurrency must be a whole number of at least 1"),
        ({"maximum": 2.5}, "the maximum concurrency must be a whole number of at least 1"),
        ({"minimum": 8, "maximum": 4}, r"the maximum concurrency \(4\) is below the minimum \(8\)"),
        ({"initial": "8"}, "the initial concurrency must be a whole number"),
    ],
)
def test_bad_bounds_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveLimit(**arguments)  # type: ignore[arg-type]
