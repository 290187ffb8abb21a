"""The 0.3 wire's rollouts and results live in the shared state (an SQLite file, or Redis): a
result is found by a poll on another process sharing it, and a server SIGKILLed and restarted on
it answers every rollout it admitted — its result, or a typed failure saying it was lost with its
process — and runs none of them again. Real processes, real sockets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server.app03 import default_results_path
from osmosis_ai.rollout.server.config import ServerConfig
from osmosis_ai.rollout.server.results03 import LOST_MESSAGE
from osmosis_ai.rollout.types.protocol import POLLING_LEASE_HEADER
from tests.rollout.v03.conftest import Gate
from tests.support.server import RunningServer
from tests.support.sockets import free_port
from tests.support.waiting import probe, wait_until

HERE = Path(__file__).parent
REPO = HERE.parent.parent.parent
FINISHED = ("success", "failure", "cancelled")
GATE = Gate()


class Held(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> list[dict]:
        if (ctx.metadata or {}).get("hold"):
            await GATE.hold()
        return [*ctx.prompt, {"role": "assistant", "content": "4"}]


class Exact(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


def submit_body(rollout_id: str, **metadata: Any) -> dict[str, Any]:
    return {
        "initial_messages": [{"role": "user", "content": "2+2?"}],
        "rollout_id": rollout_id,
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "label": "4",
        "metadata": metadata,
    }


def submit(url: str, rollout_id: str, **metadata: Any) -> str:
    response = probe().post(f"{url}/rollout", json=submit_body(rollout_id, **metadata))
    assert response.status_code == 202, response.text
    token: str = response.json()["polling_lease_token"]
    return token


def poll(url: str, rollout_id: str, token: str) -> httpx.Response:
    return probe().get(
        f"{url}/rollout/{rollout_id}/result", headers={POLLING_LEASE_HEADER: token}, timeout=30
    )


def result(url: str, rollout_id: str, token: str) -> dict[str, Any]:
    """Long-poll until the rollout is finished (each poll waits server-side)."""
    for _ in range(200):
        response = poll(url, rollout_id, token)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        if answer["status"] in FINISHED:
            return answer
    raise AssertionError(f"rollout {rollout_id} did not finish")


@pytest.fixture(params=["sqlite", "redis"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the servers of a test store their rollouts: an SQLite file, or the session's Redis."""
    if request.param == "sqlite":
        return str(tmp_path / "results.sqlite3")
    url: str = request.getfixturevalue("redis_server").url
    return url


# -- two servers sharing one state ---------------------------------------------------------------


def test_a_result_is_found_by_a_poll_on_another_server_sharing_the_state(
    serve03: Callable[..., RunningServer], state: str
) -> None:
    GATE.released.clear()
    backend = LocalBackend(workflow=Held, grader=Exact)
    first = serve03(backend, config=ServerConfig(state=state), result_wait_timeout_sec=0.5)
    second = serve03(backend, config=ServerConfig(state=state), result_wait_timeout_sec=0.5)
    token = submit(first.url, "shared-1", hold=True)
    wait_until(GATE.entered.is_set, 10, "the workflow running")
    assert poll(second.url, "shared-1", token).json()["status"] == "running"
    assert poll(second.url, "shared-1", "not-the-lease").status_code == 403
    assert poll(second.url, "never-admitted", token).status_code == 404
    duplicate = httpx.post(f"{second.url}/rollout", json=submit_body("shared-1"))
    assert duplicate.status_code == 409  # the id is taken on every server sharing the state
    GATE.release()
    answer = result(second.url, "shared-1", token)
    assert answer["status"] == "success" and answer["sample"]["reward"] == 1.0
    finished_here = submit(second.url, "shared-2")
    assert result(first.url, "shared-2", finished_here)["sample"]["reward"] == 1.0


def test_a_poll_on_another_server_tells_a_status_it_has_not_told_at_once(
    serve03: Callable[..., RunningServer], state: str
) -> None:
    GATE.released.clear()
    GATE.entered.clear()
    backend = LocalBackend(workflow=Held, grader=Exact)
    owner = serve03(backend, config=ServerConfig(state=state))  # polls wait up to 30 s for a change
    other = serve03(backend, config=ServerConfig(state=state))
    token = submit(owner.url, "told-1", hold=True)
    wait_until(GATE.entered.is_set, 10, "the workflow running")
    wait_until(lambda: poll(owner.url, "told-1", token).json()["status"] == "running", 10, "running")
    # the 202 said queued and the other server has told nothing since: a client waiting for
    # `running` (upstream's wait_for_running) is answered, not held for the whole long poll
    answer = httpx.get(
        f"{other.url}/rollout/told-1/result", headers={POLLING_LEASE_HEADER: token}, timeout=10
    ).json()
    assert answer["status"] == "running"
    GATE.release()
    assert result(other.url, "told-1", token)["status"] == "success"


def test_polls_on_another_server_keep_the_lease_of_a_long_rollout(
    serve03: Callable[..., RunningServer], state: str
) -> None:
    GATE.released.clear()
    GATE.entered.clear()
    backend = LocalBackend(workflow=Held, grader=Exact)
    timings = {"result_wait_timeout_sec": 0.2, "polling_lease_timeout_sec": 1.0}
    owner = serve03(backend, config=ServerConfig(state=state), **timings)
    other = serve03(backend, config=ServerConfig(state=state), **timings)
    token = submit(owner.url, "long-1", hold=True)
    wait_until(GATE.entered.is_set, 10, "the workflow running")
    # polled only on the other server for several of the owner's lease periods
    first = time.monotonic()
    while time.monotonic() - first < 3.0:
        assert poll(other.url, "long-1", token).json()["status"] == "running"
    GATE.release()
    answer = result(other.url, "long-1", token)
    assert answer["status"] == "success" and answer["sample"]["reward"] == 1.0, answer


def cancel(url: str, **selector: Any) -> dict[str, str]:
    response = httpx.post(f"{url}/rollout/cancel", json=selector)
    assert response.status_code == 200, response.text
    dispositions: dict[str, str] = response.json()["dispositions"]
    return dispositions


def test_a_cancel_sent_to_another_server_stops_the_rollout_where_it_runs(
    serve03: Callable[..., RunningServer], state: str
) -> None:
    GATE.released.clear()
    GATE.entered.clear()
    GATE.cancelled.clear()
    backend = LocalBackend(workflow=Held, grader=Exact)
    owner = serve03(backend, config=ServerConfig(state=state), result_wait_timeout_sec=0.5)
    other = serve03(backend, config=ServerConfig(state=state), result_wait_timeout_sec=0.5)
    running = submit(owner.url, "far-1", hold=True)
    wait_until(GATE.entered.is_set, 10, "the workflow running")
    wait_until(
        lambda: poll(other.url, "far-1", running).json()["status"] == "running", 10, "running, as stored"
    )
    assert cancel(other.url, ids=["far-1", "never-admitted"]) == {
        "far-1": "cancelled_running",
        "never-admitted": "not_found",
    }
    wait_until(GATE.cancelled.is_set, 10, "the owner stopping the workflow")
    assert cancel(other.url, ids=["far-1"]) == {"far-1": "cancelled_running"}  # idempotent
    assert cancel(owner.url, ids=["far-1"]) == {"far-1": "cancelled_running"}  # on every server
    for url in (owner.url, other.url):
        answer = poll(url, "far-1", running).json()
        assert answer["status"] == "cancelled", answer
    finished = submit(owner.url, "far-2")
    assert result(owner.url, "far-2", finished)["status"] == "success"
    assert cancel(other.url, prefix="far-") == {
        "far-1": "cancelled_running"
    }  # a finished one is not selected
    assert cancel(other.url, ids=["far-2"]) == {"far-2": "not_found"}


def test_a_finished_result_is_forgotten_after_its_retention(
    serve03: Callable[..., RunningServer], state: str
) -> None:
    backend = LocalBackend(workflow=Held, grader=Exact)
    owner = serve03(backend, config=ServerConfig(state=state), result_retention_sec=2.0)
    other = serve03(backend, config=ServerConfig(state=state), result_retention_sec=2.0)
    token = submit(owner.url, "brief-1")
    assert result(owner.url, "brief-1", token)["status"] == "success"
    # the servers' periodic sweep prunes the store: the id is then unknown everywhere, and free
    wait_until(lambda: poll(other.url, "brief-1", token).status_code == 404, 30, "the result pruned")
    assert poll(owner.url, "brief-1", token).status_code == 404
    assert result(other.url, "brief-1", submit(other.url, "brief-1"))["status"] == "success"


def test_by_default_the_servers_of_one_workflow_share_an_sqlite_file_under_xdg_state_home(
    serve03: Callable[..., RunningServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    backend = LocalBackend(workflow=Held, grader=Exact)
    first, second = serve03(backend), serve03(backend)
    token = submit(first.url, "default-1")
    assert result(second.url, "default-1", token)["status"] == "success"
    where = Path(default_results_path(backend))
    assert where.parent == tmp_path / "state" / "osmosis" / "rollout-results" and where.is_file()


def test_an_unusable_default_location_keeps_rollouts_in_memory_and_says_so(
    serve03: Callable[..., RunningServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-file"))
    server = serve03(LocalBackend(workflow=Held, grader=Exact))
    assert "kept in this process only" in caplog.text and "ServerConfig(state=...)" in caplog.text
    assert result(server.url, "memory-1", submit(server.url, "memory-1"))["status"] == "success"


def test_memory_keeps_rollouts_to_one_server(serve03: Callable[..., RunningServer]) -> None:
    backend = LocalBackend(workflow=Held, grader=Exact)
    first = serve03(backend, config=ServerConfig(state=":memory:"))
    second = serve03(backend, config=ServerConfig(state=":memory:"))
    token = submit(first.url, "alone-1")
    assert result(first.url, "alone-1", token)["status"] == "success"
    assert poll(second.url, "alone-1", token).status_code == 404


# -- a server SIGKILLed and restarted on its state -------------------------------------------------


class Process:
    """``durable_main.py`` serving on a free port, storing in ``state``, counting runs in ``runs``."""

    def __init__(self, state: str, runs: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DURABLE_STATE": state,
            "DURABLE_RUNS": str(runs),
            "DURABLE_PORT": str(self.port),
            # a killed owner is seen dead by another host's process (Redis) after its lease
            "OSMOSIS_ROLLOUT_SERVER_OWNER_LEASE_SECONDS": "2",
        }
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(HERE / "durable_main.py")], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        wait_until(self._up, 60, f"the server on {self.url}")

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(
                f"the server exited {self.process.returncode}:\n{self.log.read_text()[-3000:]}"
            )
        try:
            return probe().get(f"{self.url}/health").status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[[str], Process]]:
    started: list[Process] = []

    def start(state: str) -> Process:
        process = Process(state, tmp_path / "runs.log", tmp_path / "server.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def test_a_killed_server_restarted_on_its_state_answers_every_admitted_rollout_and_reruns_none(
    processes: Callable[[str], Process], state: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.log"
    first = processes(state)
    finished = {f"done-{n}": submit(first.url, f"done-{n}") for n in range(3)}
    held = {f"held-{n}": submit(first.url, f"held-{n}", hold=True) for n in range(3)}
    for rollout_id, token in finished.items():
        assert result(first.url, rollout_id, token)["sample"]["reward"] == 1.0
    wait_until(lambda: set(held) <= set(runs.read_text().split()), 30, "the held rollouts running")
    first.kill()

    second = processes(state)
    for rollout_id, token in finished.items():
        answer = result(second.url, rollout_id, token)
        assert answer["status"] == "success" and answer["sample"]["reward"] == 1.0, answer
    for rollout_id, token in held.items():
        answer = result(second.url, rollout_id, token)
        assert answer["status"] == "failure", answer
        assert answer["err_category"] == "internal_error" and answer["err_message"] == LOST_MESSAGE
        assert answer["sample"] is None  # a lost rollout carries no reward
    for rollout_id in [*finished, *held]:  # the ids stay taken: resubmitting cannot run one twice
        assert httpx.post(f"{second.url}/rollout", json=submit_body(rollout_id)).status_code == 409
    ran = runs.read_text().split()
    assert sorted(ran) == sorted([*finished, *held])  # each ran exactly once
