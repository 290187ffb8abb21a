"""The delivery unit against the TrainGate stand-in over loopback HTTP, on real outbox files: committed
before it is sent, retried, woken by a repeated init, kept when TrainGate never answers, re-sent by
the next start, and never lost to a broken disk."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from osmosis_ai.rollout.server.delivery import Deliveries
from osmosis_ai.rollout.server.outbox import Delivery, Outbox
from tests.support.server import fast_settings
from tests.support.trainer import Reply, TrainerStandIn

BODY = json.dumps({"rollout_id": "r-1", "status": "COMPLETED", "final_messages": [], "reward": 1.0}).encode()


def _deliveries(path: Path | None = None, window: float = 30.0, max_age: float = 3600.0) -> Deliveries:
    return Deliveries(Outbox(path), fast_settings().client, window, max_age)


def _delivery(trainer: TrainerStandIn, key: str = "k-1", rollout_id: str = "r-1") -> Delivery:
    return Delivery(key, rollout_id, trainer.url, "cb-key", BODY)


async def _sending(deliveries: Deliveries, trainer: TrainerStandIn) -> asyncio.Task[None]:
    """A callback committed and being delivered, once TrainGate has its first attempt."""
    delivery = _delivery(trainer)
    deliveries.commit(delivery)
    sending = asyncio.create_task(deliveries.deliver(delivery))
    while not trainer.completed_requests:
        await asyncio.sleep(0.01)
    return sending


async def test_a_callback_is_stored_before_it_is_sent_and_removed_once_acknowledged(
    trainer: TrainerStandIn, tmp_path: Path
):
    path = tmp_path / "outbox.sqlite3"
    deliveries = _deliveries(path)
    held = threading.Event()
    trainer.queue_completed(Reply(gate=held))
    sending = await _sending(deliveries, trainer)
    assert [d.key for d in Outbox(path).all()] == ["k-1"]  # on disk while TrainGate has not answered
    assert deliveries.pending == 1
    held.set()
    await asyncio.wait_for(sending, 10)
    assert deliveries.pending == 0 and deliveries.stored("k-1") is None
    (request,) = trainer.completed_requests
    assert request.body == BODY and request.headers["authorization"] == "Bearer cb-key"
    deliveries.close()
    assert Outbox(path).all() == []


async def test_a_repeated_init_wakes_a_delivery_waiting_out_retry_after(trainer: TrainerStandIn):
    deliveries = _deliveries()
    trainer.queue_completed(Reply(status=503, headers={"Retry-After": "600"}))
    sending = await _sending(deliveries, trainer)
    assert deliveries.resend("k-1")  # TrainGate asks again: it is up
    await asyncio.wait_for(sending, 10)  # long before the 600 s it asked for
    assert [r.status for r in trainer.completed_requests] == [503, 200]
    assert deliveries.pending == 0
    assert not deliveries.resend("k-1")  # nothing stored any more
    deliveries.close()


async def test_409_and_other_4xx_end_the_delivery(trainer: TrainerStandIn, caplog):
    caplog.set_level("INFO", logger="osmosis_ai.rollout.server.delivery")
    deliveries = _deliveries()
    trainer.queue_completed(Reply(status=409), Reply(status=400, body={"detail": "bad callback"}))
    for key in ("k-409", "k-400"):
        delivery = _delivery(trainer, key, key)
        deliveries.commit(delivery)
        await asyncio.wait_for(deliveries.deliver(delivery), 10)
    assert deliveries.pending == 0
    assert "TrainGate already has its result (409)" in caplog.text
    assert "rollout k-400: TrainGate rejected the terminal callback" in caplog.text
    deliveries.close()


async def test_an_unanswered_callback_is_kept_and_re_sent_by_the_next_start(
    trainer: TrainerStandIn, tmp_path: Path
):
    path = tmp_path / "outbox.sqlite3"
    first = _deliveries(path, window=0.3)
    trainer.queue_completed(*[Reply(status=503)] * 50)  # down for the whole window
    delivery = _delivery(trainer)
    first.commit(delivery)
    await asyncio.wait_for(first.deliver(delivery), 10)
    assert first.pending == 1
    assert await first.stop(timeout=0) == 1
    first.close()
    trainer.reset()  # TrainGate is back
    second = _deliveries(path)
    second.start()
    while second.pending:
        await asyncio.sleep(0.01)
    assert trainer.wait_completed("r-1", timeout=0)["reward"] == 1.0
    second.close()


async def test_the_next_start_drops_what_is_older_than_the_age_limit(trainer: TrainerStandIn, tmp_path: Path):
    path = tmp_path / "outbox.sqlite3"
    old = Outbox(path)
    old.put(Delivery("k-old", "r-old", trainer.url, None, BODY, created=time.time() - 7200))
    old.close()
    deliveries = _deliveries(path)
    deliveries.start()  # the default limit: an hour
    assert deliveries.pending == 0 and trainer.completed_requests == []
    deliveries.close()


async def test_a_window_ends_at_the_age_limit_and_the_callback_is_dropped(trainer: TrainerStandIn, caplog):
    caplog.set_level("WARNING", logger="osmosis_ai.rollout.server.delivery")
    deliveries = _deliveries(window=30.0, max_age=60.0)
    trainer.queue_completed(*[Reply(status=503)] * 200)  # never acknowledged
    delivery = Delivery("k-aged", "r-aged", trainer.url, None, BODY, created=time.time() - 59.5)
    deliveries.commit(delivery)
    await asyncio.wait_for(deliveries.deliver(delivery), 10)  # half a second, not the 30 s window
    assert deliveries.pending == 0
    assert "dropped the terminal callback" in caplog.text and "outbox_max_age_seconds" in caplog.text
    deliveries.close()


async def test_a_kept_callback_is_dropped_at_its_age_limit_without_a_restart(trainer: TrainerStandIn):
    deliveries = _deliveries(window=0.2, max_age=60.0)
    trainer.queue_completed(*[Reply(status=503)] * 200)
    delivery = Delivery("k-kept", "r-kept", trainer.url, None, BODY, created=time.time() - 59.0)
    deliveries.commit(delivery)
    await asyncio.wait_for(deliveries.deliver(delivery), 10)
    assert deliveries.pending == 1  # the window is over; kept for a repeated init...
    started = time.monotonic()
    while deliveries.pending and time.monotonic() - started < 10:
        await asyncio.sleep(0.02)
    assert deliveries.pending == 0  # ...until its age limit, without a restart
    deliveries.close()


async def test_stop_cancels_deliveries_still_running_at_the_end_of_the_budget(
    trainer: TrainerStandIn, tmp_path: Path
):
    deliveries = _deliveries(tmp_path / "outbox.sqlite3")
    trainer.queue_completed(Reply(status=503, headers={"Retry-After": "600"}))
    sending = await _sending(deliveries, trainer)
    assert await deliveries.stop(timeout=0.1) == 1
    assert sending.cancelled()
    deliveries.close()
    assert [d.key for d in Outbox(tmp_path / "outbox.sqlite3").all()] == ["k-1"]  # for the next start


async def test_a_callback_the_outbox_cannot_store_is_delivered_from_memory(trainer: TrainerStandIn, caplog):
    outbox = Outbox()
    outbox.close()  # every write now fails, as on a broken disk
    deliveries = Deliveries(outbox, fast_settings().client, 30.0)
    delivery = _delivery(trainer)
    deliveries.commit(delivery)
    assert deliveries.pending == 1 and deliveries.stored("k-1") == delivery
    assert "cannot write the outbox; delivering without it" in caplog.text
    await asyncio.wait_for(deliveries.deliver(delivery), 10)
    assert deliveries.pending == 0
    assert trainer.wait_completed("r-1", timeout=0)["status"] == "COMPLETED"
