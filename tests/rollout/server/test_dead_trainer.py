"""A trainer that does not answer starves no other trainer's rollouts: while its rollouts' chat calls
are retried they hold no concurrency slot, every rollout of a healthy trainer runs and reports
meanwhile, and the dead trainer's rollouts still report once it answers again."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.support.server import RunningServer, ScriptedAgent, fast_settings, init_body
from tests.support.sockets import free_port
from tests.support.trainer import TrainerStandIn
from tests.support.waiting import wait_until

SLOTS = 2
DEAD = 3  # more rollouts of the dead trainer than slots, started first
HEALTHY = 4


class _DeadTrainer:
    """A loopback address in front of ``target`` that either holds every connection unanswered
    (``hold``: accepted, never read, never answered) or refuses them (``refuse``: nothing listens),
    until :meth:`revive` makes it forward connections to ``target``."""

    def __init__(self, mode: str, target: int) -> None:
        self.mode = mode
        self.target = target
        self.port = free_port()
        self.alive = threading.Event()
        self._held: list[socket.socket] = []
        self._closing = False
        self._listener: socket.socket | None = None
        if mode == "hold":
            self._listen()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def revive(self) -> None:
        self.alive.set()
        if self._listener is None:
            self._listen()

    def close(self) -> None:
        self._closing = True
        if self._listener is not None:
            self._listener.close()
        for sock in self._held:
            sock.close()

    def _listen(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while not self._closing:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if not self.alive.is_set():
                self._held.append(conn)  # never read, never answered
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for source, sink in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@pytest.fixture(params=["hold", "refuse"])
def dead_trainer(request: pytest.FixtureRequest, trainer: TrainerStandIn) -> Iterator[_DeadTrainer]:
    dead = _DeadTrainer(request.param, trainer.port)
    yield dead
    dead.close()


def test_a_dead_trainers_rollouts_hold_no_slot_while_its_calls_are_retried(
    serve: Callable[..., RunningServer],
    http: httpx.Client,
    trainer: TrainerStandIn,
    dead_trainer: _DeadTrainer,
) -> None:
    settings = fast_settings(max_concurrent_rollouts=SLOTS, request_timeout_seconds=120.0)
    # A dead trainer's chat call is retried for far longer than a healthy rollout needs.
    settings = settings.model_copy(
        update={"client": settings.client.model_copy(update={"max_retries": 10, "retry_max_delay": 2.0})}
    )
    server = serve(ScriptedAgent(), settings=settings)
    dead_ids = [f"dead-{i}" for i in range(DEAD)]
    healthy_ids = [f"healthy-{i}" for i in range(HEALTHY)]
    for rollout_id in dead_ids:
        assert (
            http.post(
                f"{server.url}/v1/rollout/init", json=init_body(rollout_id, dead_trainer.url)
            ).status_code
            == 202
        )
    for rollout_id in healthy_ids:
        assert (
            http.post(f"{server.url}/v1/rollout/init", json=init_body(rollout_id, trainer.url)).status_code
            == 202
        )

    for rollout_id in healthy_ids:
        assert trainer.wait_completed(rollout_id, timeout=60)["status"] == "COMPLETED"
    # Every healthy rollout ran and reported while no dead one had ended: none waited for a slot
    # that a call to the dead trainer held.
    health = http.get(f"{server.url}/health").json()
    assert health["active_rollouts"] == DEAD
    assert not any(rollout_id in trainer.completed for rollout_id in dead_ids)

    dead_trainer.revive()
    for rollout_id in dead_ids:
        assert trainer.wait_completed(rollout_id, timeout=60)["status"] == "COMPLETED"
    wait_until(lambda: http.get(f"{server.url}/health").json()["active_rollouts"] == 0, timeout=30)
