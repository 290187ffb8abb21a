"""``osmosis serve`` of a 0.3 workflow and grader with ``--workers 2`` — the interop project's
``main.py`` named as ``-m main:Workflow --grader main:Grader`` (its state in Redis, behind a key), and
a ``LocalBackend`` instance (its state the default SQLite file): rollouts submitted to one worker are
polled and cancelled on the other, and a worker SIGKILLed mid-run loses none of 200 admitted
rollouts (each is its result or a typed failure) and runs none twice. Real processes, real sockets;
the model is the OpenAI-compatible stand-in, which counts the calls of each rollout."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout.server.results03 import LOST_MESSAGE
from osmosis_ai.rollout.types.protocol import POLLING_LEASE_HEADER
from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.processes import alive
from tests.support.serve import ServeProcess
from tests.support.waiting import wait_until

# One pytest-xdist worker (--dist loadgroup) runs them, so the module's two-worker server starts once.
pytestmark = pytest.mark.xdist_group("serve03")

PROJECT = Path(__file__).parent / "project"
FINISHED = ("success", "failure", "cancelled")
ASKED = re.compile(r"^(\S+): what is 2 \+ 2\?$")


def body(rollout_id: str, model_url: str) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "initial_messages": [{"role": "user", "content": f"{rollout_id}: what is 2 + 2?"}],
        "chat_completions_url": model_url,
        "label": "4",
    }


def asked(server: OpenAIServer) -> Counter[str]:
    """How many model calls each rollout made."""
    calls: Counter[str] = Counter()
    for request in list(server.requests):
        found = ASKED.match(str(request.json["messages"][-1]["content"]))
        if found:
            calls[found.group(1)] += 1
    return calls


def pinned(url: str, index: int, key: str | None = None) -> httpx.Client:
    """A client whose one kept-alive connection was accepted by worker ``index`` (sending ``key``)."""
    found: list[httpx.Client] = []
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}

    def connect() -> bool:
        client = httpx.Client(
            base_url=url, timeout=10, limits=httpx.Limits(max_connections=1), headers=headers
        )
        if client.get("/health").json()["worker"]["index"] == index:
            found.append(client)
            return True
        client.close()
        return False

    wait_until(connect, timeout=15, what=f"a connection to worker {index}")
    return found[0]


def worker_of(client: httpx.Client) -> dict[str, Any]:
    health: dict[str, Any] = client.get("/health").json()
    return health


@pytest.fixture(scope="module")
def workers() -> Iterator[ServeProcess]:
    """One server for the module's tests (starting two spawned workers is the expensive part): a
    LocalBackend instance, its rollouts in the default SQLite file beside the outbox."""
    served = ServeProcess("--local", "-m", "tests.rollout.v03.served_backend:backend", "--workers", "2")
    try:
        served.wait_ready(timeout=30)
        for index in (0, 1):  # both listening, so the kernel spreads connections over both
            pinned(served.url, index).close()
        yield served
    finally:
        served.stop()


def test_rollouts_are_polled_and_cancelled_on_the_worker_that_does_not_run_them(
    workers: ServeProcess, openai_server: OpenAIServer
) -> None:
    second = pinned(workers.url, 1)
    try:  # the backend's workflow config travelled to every worker
        assert worker_of(second)["concurrency"]["max_concurrent"] == 16
    finally:
        second.close()
    polled_and_cancelled_across_workers(workers, openai_server)


def test_the_projects_workflow_and_grader_served_by_workers_sharing_redis_behind_a_key(
    openai_server: OpenAIServer, redis_server: Any
) -> None:
    key = "k" * 32
    served = ServeProcess("--skip-register", "-H", "127.0.0.1", "-m", "main:OneCallWorkflow", "--grader",
                          "main:ExactAnswerGrader", "--workers", "2", "--state", redis_server.url, cwd=PROJECT,
                          OSMOSIS_SERVE_API_KEY=key)  # fmt: skip
    try:

        def refusing() -> bool:
            try:
                return httpx.get(f"{served.url}/health").status_code == 401
            except httpx.TransportError:  # not listening yet
                return False

        wait_until(refusing, 30, "the server up, refusing a request without the key")
        assert httpx.post(f"{served.url}/rollout/cancel", json={"all": True}).status_code == 401
        polled_and_cancelled_across_workers(served, openai_server, key)
    finally:
        code, out, err = served.stop()
    assert code == 0, err
    assert "Workflow (0.3 wire): OneCallWorkflow" in out and "Rollouts and results: redis://" in out


def polled_and_cancelled_across_workers(
    workers: ServeProcess, openai_server: OpenAIServer, key: str | None = None
) -> None:
    held = threading.Event()
    openai_server.handler = lambda payload: Reply(
        content="4", gate=held if "hold" in str(payload["messages"][-1]["content"]) else None
    )
    first, second = pinned(workers.url, 0, key), pinned(workers.url, 1, key)
    try:
        # polled on the other worker: the result is found there
        admitted = first.post("/rollout", json=body("across-1", openai_server.url))
        assert admitted.status_code == 202, admitted.text
        lease = {POLLING_LEASE_HEADER: admitted.json()["polling_lease_token"]}
        answer: dict[str, Any] = {"status": "queued"}
        while answer["status"] not in FINISHED:
            answer = second.get("/rollout/across-1/result", headers=lease).json()
        assert (answer["status"], answer["sample"]["reward"]) == ("success", 1.0), answer

        # cancelled on the other worker: the rollout stops where it runs
        admitted = first.post("/rollout", json=body("hold-1", openai_server.url))
        lease = {POLLING_LEASE_HEADER: admitted.json()["polling_lease_token"]}
        wait_until(lambda: openai_server.in_flight.now == 1, 10, "the workflow waiting on the model")
        assert first.get("/rollout/hold-1/result", headers=lease).json()["status"] == "running"
        cancelled = second.post("/rollout/cancel", json={"ids": ["hold-1", "never-admitted"]})
        assert cancelled.json()["dispositions"] == {
            "hold-1": "cancelled_running",
            "never-admitted": "not_found",
        }
        wait_until(lambda: worker_of(first)["concurrency"]["running"] == 0, 10, "the owner's slot freed")
        assert worker_of(first)["worker"]["index"] == 0  # the same connection: the owner was asked
        assert first.get("/rollout/hold-1/result", headers=lease).json()["status"] == "cancelled"
        again = first.post("/rollout/cancel", json={"prefix": "hold-"})
        assert again.json()["dispositions"] == {"hold-1": "cancelled_running"}  # idempotent, on any worker
        # /metrics, whichever worker answers, adds up both (the 0.2 wire's figures and route)
        scraped = dict(
            line.rsplit(" ", 1)
            for line in second.get("/metrics").text.splitlines()
            if not line.startswith("#")
        )
        assert float(scraped["osmosis_rollout_started_total"]) == 2
        assert float(scraped['osmosis_rollout_init_responses_total{code="202"}']) == 2
        assert float(scraped['osmosis_rollout_finished_total{status="success"}']) == 1
    finally:
        held.set()
        first.close()
        second.close()
    assert asked(openai_server) == {"across-1": 1, "hold-1": 1}


def test_a_worker_sigkilled_mid_run_loses_no_admitted_rollout_and_runs_none_twice(
    workers: ServeProcess, openai_server: OpenAIServer
) -> None:
    held = threading.Event()
    openai_server.handler = lambda payload: Reply(content="4", gate=held)
    leases: dict[str, str] = {}

    async def submit(ids: list[str]) -> None:
        fresh = httpx.Limits(max_keepalive_connections=0)  # each on its own connection: either worker
        async with httpx.AsyncClient(timeout=10, limits=fresh) as http:

            async def one(rollout_id: str) -> None:
                try:
                    response = await http.post(
                        f"{workers.url}/rollout", json=body(rollout_id, openai_server.url)
                    )
                except httpx.TransportError:  # accepted by the worker being killed: not admitted
                    return
                if response.status_code == 202:
                    leases[rollout_id] = response.json()["polling_lease_token"]

            await asyncio.gather(*(one(rollout_id) for rollout_id in ids))

    asyncio.run(submit([f"chaos-{n}" for n in range(100)]))

    def both_running() -> dict[str, Any] | None:
        with httpx.Client(timeout=5, limits=httpx.Limits(max_keepalive_connections=0)) as http:
            health: dict[str, Any] = http.get(f"{workers.url}/health").json()
        here, everywhere = health["concurrency"]["running"], health["workers"]["running_rollouts"]
        return health if everywhere > here > 0 else None

    victim = wait_until(both_running, 15, "rollouts running on both workers")["worker"]
    os.kill(victim["pid"], signal.SIGKILL)
    asyncio.run(submit([f"chaos-{n}" for n in range(100, 200)]))  # while it is restarted
    wait_until(lambda: not alive(victim["pid"]), what="the worker gone")
    held.set()

    async def results() -> dict[str, dict[str, Any]]:
        async with httpx.AsyncClient(timeout=40, limits=httpx.Limits(max_connections=None)) as http:

            async def one(rollout_id: str) -> dict[str, Any]:
                lease = {POLLING_LEASE_HEADER: leases[rollout_id]}
                while True:
                    try:
                        response = await http.get(f"{workers.url}/rollout/{rollout_id}/result", headers=lease)
                    except httpx.RemoteProtocolError:  # a kept-alive connection the server had just closed
                        continue  # a poll is safe to repeat
                    assert response.status_code == 200, (rollout_id, response.text)
                    answer: dict[str, Any] = response.json()
                    if answer["status"] in FINISHED:
                        return answer

            answers = await asyncio.gather(*(one(rollout_id) for rollout_id in leases))
            return dict(zip(leases, answers, strict=True))

    answers = asyncio.run(results())
    assert len(answers) >= 150, len(answers)
    outcomes = Counter(
        "success"
        if a["status"] == "success" and a["sample"]["reward"] == 1.0
        else "lost"
        if (a["status"], a["err_category"], a["err_message"]) == ("failure", "internal_error", LOST_MESSAGE)
        else repr(a)
        for a in answers.values()
    )
    assert set(outcomes) <= {"success", "lost"} and outcomes["lost"] > 0, outcomes
    calls = asked(openai_server)
    assert max(calls.values()) == 1, [rollout_id for rollout_id, n in calls.items() if n > 1]
    assert all(calls[rollout_id] == 1 for rollout_id, a in answers.items() if a["status"] == "success")


def test_a_wrong_target_is_one_line() -> None:
    result = cli("serve", "--local", "-m", "tests.rollout.v03.project.main:ExactAnswerGrader")
    assert result.returncode == 1
    assert result.stderr == (
        "Error: 'tests.rollout.v03.project.main:ExactAnswerGrader' is the class ExactAnswerGrader; expected a "
        "RolloutAgentLoop instance or subclass (0.2 wire), a LocalBackend instance, an AgentWorkflow subclass "
        "or the app create_rollout_server built (0.3 wire)\n"
    )
    graded = cli("serve", "--local", "-m", "tests.rollout.v03.project.main:ExactAnswerGrader", "--grader",
                 "tests.rollout.v03.project.main:ExactAnswerGrader")  # fmt: skip
    assert graded.returncode == 1
    assert graded.stderr == (
        "Error: a grader goes with an AgentWorkflow subclass, and "
        "'tests.rollout.v03.project.main:ExactAnswerGrader' is the class ExactAnswerGrader\n"
    )
