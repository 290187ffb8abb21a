"""``osmosis serve --workers 2``: one port served by two processes, duplicates deduplicated across
them, a SIGKILLed worker restarted without losing a terminal report, and one drain for all; a
restart with fewer workers sends what the workers it no longer has left."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.cli.commands.test_serve import ServeProcess
from tests.support.cli import CALCULATOR, cli
from tests.support.processes import alive
from tests.support.server import init_body
from tests.support.trainer import Reply, TrainerStandIn, completion
from tests.support.waiting import tls, wait_until

FAST_CALLBACKS = {
    "OSMOSIS_ROLLOUT_CLIENT_RETRY_BASE_DELAY": "0.1",
    "OSMOSIS_ROLLOUT_CLIENT_RETRY_MAX_DELAY": "1",
    "OSMOSIS_ROLLOUT_SERVER_SHUTDOWN_GRACE_SECONDS": "0",
    "OSMOSIS_ROLLOUT_SERVER_MAX_HEADERS": "40",  # the server's own cap, not the default, reaches every worker
}


def health_of(server: ServeProcess) -> dict[str, Any]:
    """``/health`` on a new connection, so that either worker may answer."""
    with httpx.Client(timeout=5, verify=tls()) as http:
        reply: dict[str, Any] = http.get(f"{server.url}/health").json()
        return reply


def answering(server: ServeProcess, want: Any) -> dict[str, Any]:
    """The first ``/health`` answer (each on a new connection) for which ``want(answer)`` holds."""
    found: dict[str, Any] = {}

    def check() -> bool:
        found.update(health_of(server))
        return bool(want(found))

    wait_until(check, timeout=15, what="a worker answering as wanted")
    return found


def _runs(trainer: TrainerStandIn, rollout_id: str) -> int:
    return sum(1 for r in trainer.chat_requests if r.json and r.json.get("rollout_id") == rollout_id)


def test_two_workers_serve_one_port_dedupe_survive_a_sigkill_and_drain_on_sigterm(trainer: TrainerStandIn):
    # One server for every step: starting two spawned workers is the expensive part.
    workers = ServeProcess("--local", "--no-validate", "-m", CALCULATOR, "--workers", "2", **FAST_CALLBACKS)
    try:
        workers.wait_ready(timeout=30)
        pids = repeated_init_runs_once(workers, trainer)
        heads_are_capped_in_every_worker(workers)
        pids |= sigkilled_worker_loses_no_report(workers, trainer)
        workers.proc.send_signal(signal.SIGTERM)
        out, err = workers.proc.communicate(timeout=60)
    finally:
        workers.stop()
    assert workers.proc.returncode == -signal.SIGTERM, err  # stopped by the signal, as with one worker
    assert "stopping 2 workers (draining)" in err and err.count("Application shutdown complete") == 2
    assert not any(alive(pid) for pid in pids)
    assert "Workers: 2" in out


def heads_are_capped_in_every_worker(workers: ServeProcess) -> None:
    crowded = {f"x-filler-{i}": "1" for i in range(60)}  # past the configured 40, within the default 100
    with httpx.Client(timeout=5, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        assert {http.get(f"{workers.url}/health", headers=crowded).status_code for _ in range(8)} == {431}


def repeated_init_runs_once(workers: ServeProcess, trainer: TrainerStandIn) -> set[int]:
    seen = {
        answering(workers, lambda h, i=index: h["worker"]["index"] == i)["worker"]["pid"] for index in (0, 1)
    }
    assert len(seen) == 2 and os.getpid() not in seen
    gate = threading.Event()

    def held(payload: dict[str, Any]) -> Reply:
        message = {"role": "assistant", "content": "The answer is #### 3"}
        return Reply(body=completion(message, len(payload["messages"]), payload["rollout_id"]), gate=gate)

    trainer.chat_handler = held

    async def send_20() -> list[httpx.Response]:
        fresh = httpx.Limits(max_keepalive_connections=0)  # each init on its own connection
        async with httpx.AsyncClient(timeout=10, limits=fresh) as http:
            body = init_body("w-dup", trainer.url)
            return await asyncio.gather(
                *(http.post(f"{workers.url}/v1/rollout/init", json=body) for _ in range(20))
            )

    answers = asyncio.run(send_20())
    assert {(a.status_code, a.json()["rollout_id"]) for a in answers} == {(202, "w-dup")}
    totals = answering(workers, lambda h: h["workers"]["active_rollouts"] == 1)["workers"]
    assert (totals["count"], totals["alive"]) == (2, 2)
    gate.set()
    assert trainer.wait_completed("w-dup", timeout=10)["status"] == "COMPLETED"
    assert _runs(trainer, "w-dup") == 1
    assert len([r for r in trainer.completed_requests if r.json["rollout_id"] == "w-dup"]) == 1
    return seen


def sigkilled_worker_loses_no_report(workers: ServeProcess, trainer: TrainerStandIn) -> set[int]:
    trainer.queue_completed(*[Reply(status=503)] * 10_000)  # TrainGate down: reports wait in the outboxes
    ids = [f"w-kill-{n}" for n in range(6)]
    with httpx.Client(timeout=5, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        for rollout_id in ids:
            assert (
                http.post(
                    f"{workers.url}/v1/rollout/init", json=init_body(rollout_id, trainer.url)
                ).status_code
                == 202
            )
    answering(workers, lambda h: h["workers"]["pending_deliveries"] == len(ids))
    victim = answering(workers, lambda h: h["pending_deliveries"] > 0)
    os.kill(victim["worker"]["pid"], signal.SIGKILL)
    wait_until(lambda: not alive(victim["worker"]["pid"]), what="the worker gone")
    trainer.reset()  # TrainGate is back
    for rollout_id in ids:
        assert trainer.wait_completed(rollout_id, timeout=15)["status"] == "COMPLETED"
    restarted = answering(workers, lambda h: h["worker"]["index"] == victim["worker"]["index"])
    assert restarted["worker"]["pid"] != victim["worker"]["pid"]
    assert answering(
        workers, lambda h: h["workers"]["alive"] == 2 and h["workers"]["pending_deliveries"] == 0
    )
    assert all(_runs(trainer, rollout_id) == 0 for rollout_id in ids)  # re-sent, not run again
    return {restarted["worker"]["pid"]}


def test_a_restart_with_fewer_workers_sends_what_the_missing_workers_left(
    trainer: TrainerStandIn, tmp_path: Path
):
    outbox = tmp_path / "outbox.sqlite3"
    left = tmp_path / "outbox.worker-2.sqlite3"
    serve = ("--local", "--no-validate", "-m", CALCULATOR, "--outbox", str(outbox))
    trainer.queue_completed(*[Reply(status=503)] * 10_000)  # TrainGate down: reports wait in the outboxes
    three = ServeProcess(*serve, "--workers", "3", **FAST_CALLBACKS)
    ids: list[str] = []
    try:
        three.wait_ready(timeout=30)

        def worker_2_holds_a_report() -> bool:
            with httpx.Client(
                timeout=5, limits=httpx.Limits(max_keepalive_connections=0), verify=tls()
            ) as http:
                for _ in range(3):
                    ids.append(f"fewer-{len(ids)}")
                    body = init_body(ids[-1], trainer.url)
                    assert http.post(f"{three.url}/v1/rollout/init", json=body).status_code == 202
            return answering(three, lambda h: h["worker"]["index"] == 2)["pending_deliveries"] > 0

        wait_until(worker_2_holds_a_report, timeout=30, what="worker 2 holding an undelivered report")
        answering(three, lambda h: h["workers"]["pending_deliveries"] == len(ids))
        pids = [answering(three, lambda h, i=index: h["worker"]["index"] == i)["worker"]["pid"]
                for index in range(3)]  # fmt: skip
        for pid in (three.proc.pid, *pids):  # a crash: nothing drains
            os.kill(pid, signal.SIGKILL)
        three.proc.wait(timeout=10)
        wait_until(lambda: not any(alive(pid) for pid in pids), what="the workers gone")
    finally:
        three.stop()
    assert left.exists()

    trainer.reset()  # TrainGate is back
    two = ServeProcess(*serve, "--workers", "2", **FAST_CALLBACKS)
    try:
        two.wait_ready(timeout=30)
        for rollout_id in ids:
            assert trainer.wait_completed(rollout_id, timeout=15)["status"] == "COMPLETED"
        assert answering(two, lambda h: h["workers"]["pending_deliveries"] == 0)
    finally:
        code, _, err = two.stop()
    assert code == 0, err
    assert all(_runs(trainer, rollout_id) == 0 for rollout_id in ids)  # re-sent, not run again
    assert "unacknowledged callbacks of worker 2" in err
    assert not any(path.name.startswith("outbox.worker-2") for path in tmp_path.iterdir())


def test_reload_and_workers_refuse_each_other_in_one_line():
    result = cli("serve", "-m", CALCULATOR, "--local", "--reload", "--workers", "2")
    assert result.returncode == 1
    assert result.stderr == (
        "Error: --reload and --workers cannot be combined: --reload restarts one development process\n"
    )


def test_a_state_that_is_neither_redis_nor_a_file_is_one_line():
    result = cli("serve", "-m", CALCULATOR, "--local", "--state", "http://127.0.0.1:6379/0")
    assert result.returncode == 1
    assert result.stderr == (
        "Error: --state: the state 'http://127.0.0.1:6379/0' looks like a URL but is not a Redis one: expected "
        "redis://HOST:PORT/DB, rediss://HOST:PORT/DB or unix:///PATH, or an SQLite file path\n"
    )
