"""The 0.3 wire served by this package's engine, over real sockets: submit, leased long polls,
cancel, health, auth, admission (409/422/429/503), deadlines and typed failures."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server.config import ServerConfig
from osmosis_ai.rollout.types import AgentWorkflowConfig, ConcurrencyConfig, RolloutStatus
from tests.rollout.v03.conftest import Gate
from tests.support.server import RunningServer, fast_settings
from tests.support.waiting import wait_until

LEASE = "X-Osmosis-Rollout-Lease"
GATES: dict[str, Gate] = {}


def body(rollout_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "initial_messages": [{"role": "user", "content": "2+2?"}],
        "rollout_id": rollout_id,
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "label": "4",
        **fields,
    }


class Scripted(AgentWorkflow[AgentWorkflowConfig]):
    """Behaves as the rollout's metadata says: ``hold`` (a gate's name), ``raise``."""

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> Any:
        meta = ctx.metadata or {}
        context = get_rollout_context()
        assert context is not None
        if "claim" in meta:  # a workflow reporting a status it may not set
            await context.set_status(RolloutStatus(meta["claim"]))
        if "hold" in meta:
            await GATES[meta["hold"]].hold()
        if "stubborn" in meta:  # ignores cancellation until released
            stubborn = GATES[meta["stubborn"]]
            stubborn.entered.set()
            while not stubborn.released.is_set():
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    stubborn.cancelled.set()
        if "unjson" in meta:  # a message JSON cannot carry
            return [*ctx.prompt, {"role": "assistant", "content": object()}]
        if meta.get("raise") == "value":
            raise ValueError("the workflow did not like its input")
        answer = f"4 from {context.rollout_id} at {context.chat_completions_url}"
        return [*ctx.prompt, {"role": "assistant", "content": answer}]


class ScriptedGrader(Grader):
    """Rewards 1.0, or as the metadata says: ``grader`` = ``raise``, ``none``, ``exit``, ``hold:NAME``."""

    async def grade(self, ctx: GraderContext) -> None:
        how = (ctx.metadata or {}).get("grader", "")
        if how == "raise":
            raise RuntimeError("the grader broke")
        if how == "none":
            return
        if how == "exit":
            sys.exit(3)
        if how.startswith("hold:"):
            await GATES[how[5:]].hold()
        ctx.set_reward(1.0)


def gate(name: str) -> Gate:
    GATES[name] = Gate()
    return GATES[name]


def submit(http: httpx.Client, server: RunningServer, rollout_id: str, **fields: Any) -> str:
    answer = http.post(f"{server.url}/rollout", json=body(rollout_id, **fields))
    assert answer.status_code == 202, answer.text
    admission = answer.json()
    assert admission["rollout_id"] == rollout_id and admission["status"] == "queued"
    return str(admission["polling_lease_token"])


def poll(http: httpx.Client, server: RunningServer, rollout_id: str, token: str) -> dict[str, Any]:
    answer = http.get(f"{server.url}/rollout/{rollout_id}/result", headers={LEASE: token})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def finished(http: httpx.Client, server: RunningServer, rollout_id: str, token: str) -> dict[str, Any]:
    seen = []
    while True:
        result = poll(http, server, rollout_id, token)
        seen.append(result["status"])
        if result["status"] in ("success", "failure", "cancelled"):
            assert len(seen) < 10, seen
            return result


def backend(**kwargs: Any) -> LocalBackend:
    return LocalBackend(workflow=Scripted, grader=ScriptedGrader, **kwargs)


def one_slot() -> LocalBackend:
    config = AgentWorkflowConfig(name="one", concurrency=ConcurrencyConfig(max_concurrent=1))
    return backend(workflow_config=config)


def test_a_rollout_succeeds_with_the_graders_reward(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    server = serve03(backend())
    token = submit(http, server, "r-1", metadata={})
    result = finished(http, server, "r-1", token)
    assert result["status"] == "success" and result["err_category"] is None
    sample = result["sample"]
    assert sample["reward"] == 1.0 and sample["label"] == "4"
    assert sample["messages"][-1]["content"] == "4 from r-1 at http://127.0.0.1:9/v1"
    assert "trajectory_messages" not in sample
    assert poll(http, server, "r-1", token) == result  # retained: asked again, answered again


def test_user_code_reports_progress_but_cannot_finish_the_rollout(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    held = gate("claims")
    server = serve03(backend(), result_wait_timeout_sec=0.2)
    token = submit(http, server, "claims", metadata={"claim": "success", "hold": "claims"})
    wait_until(held.entered.is_set, 10, "the workflow holding")
    assert poll(http, server, "claims", token) == {
        "rollout_id": "claims", "status": "running", "sample": None, "err_message": None, "err_category": None,
    }  # fmt: skip
    held.release()
    assert finished(http, server, "claims", token)["sample"]["reward"] == 1.0


def test_admission_and_polling_refusals(serve03: Callable[..., RunningServer], http: httpx.Client) -> None:
    server = serve03(backend())
    token = submit(http, server, "dup")
    assert http.post(f"{server.url}/rollout", json=body("dup")).status_code == 409
    for bad in (body("a/b"), body(".."), {**body("x"), "initial_messages": "no"}, {"rollout_id": "x"}):
        assert http.post(f"{server.url}/rollout", json=bad).status_code == 422
    assert http.post(f"{server.url}/rollout", content=b'{"rollout_id": "x", "agent_timeout_sec": Infinity}',
                     headers={"content-type": "application/json"}).status_code == 422  # fmt: skip
    assert http.get(f"{server.url}/rollout/dup/result").status_code == 422  # no lease header
    assert http.get(f"{server.url}/rollout/dup/result", headers={LEASE: "wrong"}).status_code == 403
    assert http.get(f"{server.url}/rollout/nope/result", headers={LEASE: token}).status_code == 404
    assert finished(http, server, "dup", token)["status"] == "success"


def test_with_an_api_key_every_route_wants_the_bearer(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    server = serve03(backend(), api_key="k-0123456789")
    for wrong in ({}, {"Authorization": "Bearer nope"}):
        assert http.get(f"{server.url}/health", headers=wrong).status_code == 401
        answer = http.post(f"{server.url}/rollout", json=body("r"), headers=wrong)
        assert answer.status_code == 401 and answer.json() == {"detail": "unauthorized"}
        assert http.post(f"{server.url}/rollout/cancel", json={"all": True}, headers=wrong).status_code == 401
    good = {"Authorization": "Bearer k-0123456789"}
    assert http.get(f"{server.url}/health", headers=good).status_code == 200
    assert http.post(f"{server.url}/rollout", json=body("r"), headers=good).status_code == 202


@pytest.mark.parametrize(
    ("fields", "category", "message"),
    [
        ({"metadata": {"grader": "raise"}}, "agent_error", "grader: the grader broke"),
        ({"metadata": {"grader": "none"}}, "validation_error", "set no reward"),
        ({"metadata": {"grader": "exit"}}, "agent_error", "SystemExit: 3"),
        ({"metadata": {"raise": "value"}}, "validation_error", "workflow: the workflow did not like"),
        ({"label": None}, "validation_error", "neither a label nor metadata"),
    ],
)
def test_failures_are_typed_and_never_carry_a_reward(
    serve03: Callable[..., RunningServer],
    http: httpx.Client,
    fields: dict[str, Any],
    category: str,
    message: str,
) -> None:
    server = serve03(backend())
    result = finished(http, server, "f", submit(http, server, "f", **fields))
    assert result["status"] == "failure" and result["err_category"] == category
    assert message in result["err_message"]
    assert result["sample"] is None or result["sample"]["reward"] is None
    # the server is still serving (a grader's sys.exit stayed inside its rollout)
    assert finished(http, server, "ok", submit(http, server, "ok", metadata={}))["status"] == "success"


def test_a_sample_json_cannot_carry_is_reduced_to_its_reward(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    server = serve03(backend())
    result = finished(http, server, "odd", submit(http, server, "odd", metadata={"unjson": True}))
    assert result["status"] == "success"
    assert result["sample"] == {
        "messages": [], "label": "4", "reward": 1.0, "remove_sample": False, "metrics": {}, "extra_fields": {},
    }  # fmt: skip


def test_without_grading_a_success_has_no_reward(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    server = serve03(backend())
    result = finished(http, server, "g", submit(http, server, "g", grade=False))
    assert result["status"] == "success" and result["sample"]["reward"] is None


def test_a_hanging_grader_fails_typed_at_its_deadline_and_others_succeed(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    hung = gate("grader-hang")
    server = serve03(backend())
    token = submit(http, server, "hang", metadata={"grader": "hold:grader-hang"}, grader_timeout_sec=0.3)
    others = {f"o-{i}": submit(http, server, f"o-{i}", metadata={}) for i in range(3)}
    result = finished(http, server, "hang", token)
    assert result["status"] == "failure" and result["err_category"] == "timeout"
    assert result["err_message"] == "the grader exceeded its 0.3 s deadline"
    assert result["sample"]["reward"] is None
    assert hung.cancelled.is_set()
    for rollout_id, other in others.items():
        assert finished(http, server, rollout_id, other)["sample"]["reward"] == 1.0


def test_time_spent_queued_comes_out_of_the_agents_deadline(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    holder = gate("slot")
    server = serve03(one_slot(), result_wait_timeout_sec=1.0, polling_lease_timeout_sec=30.0)
    first = submit(http, server, "holder", metadata={"hold": "slot"})
    wait_until(holder.entered.is_set, 10, "the first rollout holding the only slot")
    second = submit(http, server, "queued", agent_timeout_sec=0.5, metadata={})
    # one full long poll (1 s, the server's own wait) passes while the second waits for the slot
    assert poll(http, server, "queued", second)["status"] == "queued"
    holder.release()
    result = finished(http, server, "queued", second)
    assert result["status"] == "failure" and result["err_category"] == "timeout"
    assert result["err_message"].startswith("the workflow exceeded its 0.5 s deadline (")
    assert "spent queued" in result["err_message"]
    assert finished(http, server, "holder", first)["status"] == "success"


def test_a_workflow_ignoring_its_deadline_is_abandoned_and_its_slot_freed(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    stubborn = gate("stubborn")
    config = ServerConfig(server=fast_settings(abandon_grace_seconds=0.2).server)
    server = serve03(one_slot(), config=config)
    try:
        token = submit(http, server, "stubborn", metadata={"stubborn": "stubborn"}, agent_timeout_sec=0.2)
        result = finished(http, server, "stubborn", token)
        assert result["status"] == "failure" and result["err_category"] == "timeout"
        assert result["err_message"] == (
            "the workflow exceeded its 0.2 s deadline; it ignored cancellation for 0.2 s more and was abandoned"
        )
        assert stubborn.cancelled.is_set()
        # the only slot is free again although the abandoned workflow still runs
        assert (
            finished(http, server, "next", submit(http, server, "next", metadata={}))["status"] == "success"
        )
    finally:
        stubborn.release()


def test_at_the_queue_limit_a_submit_gets_429_with_retry_after(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    holder = gate("full")
    config = ServerConfig(server=fast_settings(max_queued_rollouts=0).server)
    server = serve03(one_slot(), config=config)
    token = submit(http, server, "running", metadata={"hold": "full"})
    refused = http.post(f"{server.url}/rollout", json=body("refused"))
    assert refused.status_code == 429 and refused.headers["retry-after"].isdigit()
    holder.release()
    assert finished(http, server, "running", token)["status"] == "success"
    assert (
        finished(http, server, "refused", submit(http, server, "refused", metadata={}))["status"] == "success"
    )


def test_submits_arriving_at_once_are_admitted_up_to_the_queue_limit_and_an_id_once(
    serve03: Callable[..., RunningServer],
) -> None:
    holder = gate("burst")
    config = ServerConfig(server=fast_settings(max_queued_rollouts=1).server)
    server = serve03(one_slot(), config=config)  # the store's writes suspend each admission
    payloads = [body(f"burst-{n}", metadata={"hold": "burst"}) for n in range(6)] + [body("burst-0")]

    async def burst() -> list[int]:
        host, port = server.url.removeprefix("http://").split(":")
        connections = [await asyncio.open_connection(host, int(port)) for _ in payloads]
        # every request sent before any answer is read, so the server takes them in one turn
        for (_, writer), payload in zip(connections, payloads, strict=True):
            data = json.dumps(payload).encode()
            writer.write(b"POST /rollout HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(data), data))  # fmt: skip
        codes = [int((await reader.readline()).split()[1]) for reader, _ in connections]
        for _, writer in connections:
            writer.close()
        return codes

    codes = asyncio.run(burst())
    assert sorted(codes[:6]) == [202, 202, 429, 429, 429, 429], codes  # one running, one queued
    assert codes[6] in (409, 429), codes  # the id of one of them: never a second rollout
    holder.release()


def test_cancel_by_prefix_ids_and_all_is_idempotent(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    running = gate("cancel")
    server = serve03(one_slot())
    first = submit(http, server, "job-1", metadata={"hold": "cancel"})
    wait_until(running.entered.is_set, 10, "job-1 running")
    second = submit(http, server, "job-2", metadata={})
    other = submit(http, server, "other", metadata={})
    url = f"{server.url}/rollout/cancel"
    expected = {"job-1": "cancelled_running", "job-2": "cancelled_queued"}
    assert http.post(url, json={"prefix": "job-"}).json() == {"dispositions": expected}
    assert http.post(url, json={"ids": ["job-1", "job-2", "ghost"]}).json() == {
        "dispositions": {**expected, "ghost": "not_found"}
    }
    assert running.cancelled.is_set() or wait_until(running.cancelled.is_set, 10, "job-1 cancelled")
    for rollout_id, token in (("job-1", first), ("job-2", second)):
        assert poll(http, server, rollout_id, token)["status"] == "cancelled"
    assert finished(http, server, "other", other)["status"] == "success"
    assert http.post(url, json={"all": True}).json()["dispositions"]["other"] == "not_found"
    for bad in ({}, {"all": True, "prefix": "x"}, {"ids": [], "prefix": "x"}):
        assert http.post(url, json=bad).status_code == 422


def test_a_lease_left_to_expire_ends_the_rollout(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    abandoned = gate("unpolled")
    server = serve03(backend(), result_wait_timeout_sec=0.2, polling_lease_timeout_sec=0.5)
    token = submit(http, server, "unpolled", metadata={"hold": "unpolled"})
    wait_until(abandoned.cancelled.is_set, 10, "the unpolled rollout cancelled")
    result = poll(http, server, "unpolled", token)
    assert result["status"] == "failure" and result["err_category"] == "lease_expired"


def test_a_polled_lease_is_renewed(serve03: Callable[..., RunningServer], http: httpx.Client) -> None:
    long = gate("polled")
    server = serve03(backend(), result_wait_timeout_sec=0.2, polling_lease_timeout_sec=0.5)
    token = submit(http, server, "polled", metadata={"hold": "polled"})
    for _ in range(5):  # 5 full polls of 0.2 s: 1 s in all, twice the lease, each renewing it
        assert poll(http, server, "polled", token)["status"] == "running"
    long.release()
    assert finished(http, server, "polled", token)["status"] == "success"
    assert not long.cancelled.is_set()


def test_a_poll_tells_a_status_change_that_came_before_it_at_once(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    holder = gate("running")
    server = serve03(  # a poll that waited for a change would hang the test
        backend(), result_wait_timeout_sec=3600.0, polling_lease_timeout_sec=7200.0
    )
    token = submit(http, server, "r1", metadata={"hold": "running"})
    wait_until(holder.entered.is_set, 10, "r1 running")
    assert poll(http, server, "r1", token)["status"] == "running"  # queued when admitted, running since
    holder.release()
    assert finished(http, server, "r1", token)["status"] == "success"


def test_a_result_is_forgotten_after_its_retention(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    server = serve03(backend(), result_retention_sec=2.0)  # time enough to read it, on any machine
    token = submit(http, server, "brief", metadata={})
    assert finished(http, server, "brief", token)["status"] == "success"
    url = f"{server.url}/rollout/brief/result"
    wait_until(lambda: http.get(url, headers={LEASE: token}).status_code == 404, 10, "the result forgotten")
    assert submit(http, server, "brief", metadata={})  # the id may be used again


def test_health_says_who_answers_and_what_it_runs(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    holder = gate("health")
    server = serve03(one_slot())
    token = submit(http, server, "h1", metadata={"hold": "health"})
    wait_until(holder.entered.is_set, 10, "h1 running")
    submit(http, server, "h2", metadata={})
    health = http.get(f"{server.url}/health").json()
    assert health["status"] == "ok" and health["process_id"] == health["instance_id"]
    assert health["concurrency"] == {"max_concurrent": 1, "queued": 1, "running": 1}
    assert health["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 2}
    holder.release()
    finished(http, server, "h1", token)
    wait_until(
        lambda: http.get(f"{server.url}/health").json()["lifecycle"]["active_rollouts"] == 0, 10, "idle"
    )


def test_while_draining_a_submit_gets_503_and_the_users_lifespan_outlives_the_drain(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        events.append("started")
        yield
        events.append("stopped")

    draining = gate("drain")
    server = serve03(backend(), lifespan=lifespan)
    assert events == ["started"]
    token = submit(http, server, "in-flight", metadata={"hold": "drain"})
    wait_until(draining.entered.is_set, 10, "in-flight running")
    server.server.should_exit = True  # DrainingServer: drains while HTTP still answers
    wait_until(
        lambda: not http.get(f"{server.url}/health").json()["lifecycle"]["accepting_rollouts"], 10, "draining"
    )
    refused = http.post(f"{server.url}/rollout", json=body("late"))
    assert refused.status_code == 503 and "retry-after" in refused.headers
    assert events == ["started"]
    draining.release()
    assert poll(http, server, "in-flight", token)["status"] in ("running", "grading", "success")
    wait_until(lambda: not server.running, 20, "the server stopped")
    assert events == ["started", "stopped"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"result_wait_timeout_sec": 0}, ValueError, "result_wait_timeout_sec"),
        ({"result_wait_timeout_sec": 30, "polling_lease_timeout_sec": 30}, ValueError, "longer than"),
        ({"result_retention_sec": float("inf")}, ValueError, "result_retention_sec"),
        ({"api_key": "  "}, ValueError, "api_key"),
        ({"backend": object()}, TypeError, "takes a LocalBackend"),
    ],
)
def test_create_rollout_server_refuses_nonsense(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    from osmosis_ai.rollout.server import create_rollout_server

    with pytest.raises(error, match=match):
        create_rollout_server(**{"backend": backend(), "configure_logging": False, **kwargs})


def test_a_submit_above_max_request_bytes_gets_413_after_the_key_check(
    serve03: Callable[..., RunningServer], http: httpx.Client
) -> None:
    config = ServerConfig(server=fast_settings().server, max_request_bytes=2000, api_key="k-0123456789")
    server = serve03(backend(), config=config)
    big = body("big", metadata={"padding": "x" * 5000})
    assert http.post(f"{server.url}/rollout", json=big).status_code == 401
    good = {"Authorization": "Bearer k-0123456789"}
    refused = http.post(f"{server.url}/rollout", json=big, headers=good)
    assert refused.status_code == 413 and "2000 bytes" in refused.json()["detail"]
    chunked = http.post(f"{server.url}/rollout", content=iter([b"{", b" " * 3000, b"}"]), headers=good)
    assert chunked.status_code == 413
    assert (
        http.post(f"{server.url}/rollout", json=body("small", metadata={}), headers=good).status_code == 202
    )
