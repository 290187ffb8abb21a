"""POST /v1/rollout/init, /health and /platform/health over real sockets: shapes, dedup, auth, bad input."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout.config.settings import RolloutSettings
from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.server.app import create_app
from tests.support.server import ADD_TOOL, ScriptedAgent, fast_config, fast_settings, init_body
from tests.support.trainer import TrainerStandIn
from tests.support.waiting import wait_until

KEY = "osm_rollout_test-key"
EXPECTED_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": None, "enum": None},
                "b": {"type": "number", "description": None, "enum": None},
            },
            "required": ["a", "b"],
        },
        "strict": False,
    },
}


def test_init_answers_202_with_tools_in_0_2_shape_and_runs_the_rollout(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent())
    response = http.post(f"{server.url}/v1/rollout/init", json=init_body("r-1", trainer.url))
    assert response.status_code == 202
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"rollout_id": "r-1", "tools": [EXPECTED_TOOL]}
    done = trainer.wait_completed("r-1")
    assert done["status"] == "COMPLETED"
    assert done["reward"] == 1.0
    assert trainer.chat_requests[0].headers["authorization"] == "Bearer trainer-secret"


def test_health_reports_counts_and_capacity(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent(), max_concurrent=7, settings=fast_settings(max_queued_rollouts=3))
    http.post(f"{server.url}/v1/rollout/init", json=init_body("r-h", trainer.url))
    trainer.wait_completed("r-h")
    _wait_idle(http, server.url)
    assert http.get(f"{server.url}/health").json() == {
        "status": "healthy",
        "agent_loop": "scripted",
        "active_rollouts": 0,
        "completed_rollouts": 1,
        "running_rollouts": 0,
        "queued_rollouts": 0,
        "max_concurrent_rollouts": 7,
        "max_queued_rollouts": 3,
        "pending_deliveries": 0,
        "abandoned_rollouts": 0,
    }


def _wait_idle(http: httpx.Client, url: str) -> None:
    """Until no rollout is running or queued: nothing more will be sent to TrainGate."""
    wait_until(lambda: http.get(f"{url}/health").json()["active_rollouts"] == 0, what="idle server")


@pytest.mark.parametrize(
    ("second", "expected_rollout_id"),
    [
        ({"rollout_id": "dup-1"}, "dup-1"),  # same rollout_id, no key
        ({"rollout_id": "dup-1", "idempotency_key": ""}, "dup-1"),  # empty key falls back to rollout_id
        (
            {"rollout_id": "dup-other", "idempotency_key": "dup-1"},
            "dup-1",
        ),  # the key decides: the original id is answered
    ],
)
def test_duplicate_init_of_a_running_rollout_is_answered_from_the_record_without_a_second_run(
    serve, http, trainer: TrainerStandIn, second: dict[str, Any], expected_rollout_id: str
):
    release = threading.Event()

    async def held(ctx: Any) -> Any:
        await asyncio.to_thread(release.wait, 10)
        return ctx.complete([], reward=1.0)

    agent = ScriptedAgent(held)
    server = serve(agent)
    first = http.post(f"{server.url}/v1/rollout/init", json=init_body("dup-1", trainer.url))
    again = http.post(
        f"{server.url}/v1/rollout/init", json=init_body(second.pop("rollout_id"), trainer.url, **second)
    )
    release.set()
    assert again.status_code == 202
    assert again.json() == {**first.json(), "rollout_id": expected_rollout_id}
    trainer.wait_completed("dup-1")
    _wait_idle(http, server.url)
    assert len(trainer.completed_requests) == 1
    assert agent.get_tools_calls == 1


def test_duplicate_init_of_an_acknowledged_rollout_starts_it_afresh(serve, http, trainer: TrainerStandIn):
    agent = ScriptedAgent()
    server = serve(agent)
    http.post(f"{server.url}/v1/rollout/init", json=init_body("again-1", trainer.url))
    trainer.wait_completed("again-1")
    wait_until(lambda: http.get(f"{server.url}/health").json()["pending_deliveries"] == 0)
    assert (
        http.post(f"{server.url}/v1/rollout/init", json=init_body("again-1", trainer.url)).status_code == 202
    )
    wait_until(lambda: len(trainer.completed_requests) == 2, what="a second run")
    assert agent.get_tools_calls == 2


def test_duplicate_init_of_an_unacknowledged_rollout_re_sends_its_stored_result_at_once(
    serve, http, trainer: TrainerStandIn
):
    from tests.support.trainer import Reply

    # TrainGate is "down" for the callback: a long Retry-After would keep the result waiting.
    trainer.queue_completed(Reply(status=503, headers={"Retry-After": "60"}))
    runs: list[str] = []

    async def counted(ctx: Any) -> Any:
        runs.append(ctx.request.rollout_id)
        return ctx.complete([], reward=1.0)

    agent = ScriptedAgent(counted)
    server = serve(agent)
    http.post(f"{server.url}/v1/rollout/init", json=init_body("stored-1", trainer.url))
    wait_until(lambda: len(trainer.completed_requests) == 1)
    assert http.get(f"{server.url}/health").json()["pending_deliveries"] == 1
    again = http.post(f"{server.url}/v1/rollout/init", json=init_body("stored-1", trainer.url))
    assert again.status_code == 202
    assert trainer.wait_completed("stored-1")["status"] == "COMPLETED"  # re-sent now, not in 60 s
    assert runs == ["stored-1"]  # the stored result, not a second run
    wait_until(lambda: http.get(f"{server.url}/health").json()["pending_deliveries"] == 0)


def test_same_rollout_id_with_two_idempotency_keys_runs_twice(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent())
    for key in ("k1", "k2"):
        response = http.post(
            f"{server.url}/v1/rollout/init", json=init_body("twice", trainer.url, idempotency_key=key)
        )
        assert response.status_code == 202
    wait_until(lambda: len(trainer.completed_requests) == 2, what="two completions")


def test_concurrent_duplicates_wait_for_a_slow_get_tools_and_share_its_answer(serve, trainer: TrainerStandIn):
    def slow_tools(request: Any) -> list[dict[str, Any]]:
        time.sleep(0.3)
        return [ADD_TOOL]

    agent = ScriptedAgent(tools=slow_tools)
    server = serve(agent)
    results: list[httpx.Response] = []

    def post() -> None:
        with httpx.Client(timeout=10) as client:
            results.append(client.post(f"{server.url}/v1/rollout/init", json=init_body("slow", trainer.url)))

    threads = [threading.Thread(target=post) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in results] == [202, 202, 202]
    assert len({r.content for r in results}) == 1
    assert agent.get_tools_calls == 1


@pytest.mark.parametrize(
    "tools",
    [
        RuntimeError("boom"),
        [{"type": "function", "function": {"name": "no_description"}}],  # not a valid tool schema
    ],
)
def test_get_tools_failure_is_500_and_leaves_no_record(serve, http, trainer: TrainerStandIn, tools: Any):
    agent = ScriptedAgent(tools=tools)
    server = serve(agent)
    response = http.post(f"{server.url}/v1/rollout/init", json=init_body("bad-tools", trainer.url))
    assert response.status_code == 500
    assert response.text == "Internal Server Error"
    assert http.get(f"{server.url}/health").json()["active_rollouts"] == 0  # nothing leaked
    agent.tools = [ADD_TOOL]  # the same key may be retried once the agent is fixed
    retry = http.post(f"{server.url}/v1/rollout/init", json=init_body("bad-tools", trainer.url))
    assert retry.status_code == 202
    assert trainer.wait_completed("bad-tools")["status"] == "COMPLETED"


def test_tool_serialization_follows_changes_of_a_mutated_list(serve, http, trainer: TrainerStandIn):
    tools = [ADD_TOOL]
    server = serve(ScriptedAgent(tools=lambda request: tools))
    first = http.post(f"{server.url}/v1/rollout/init", json=init_body("m-1", trainer.url)).json()
    tools.append({**ADD_TOOL, "function": {**ADD_TOOL["function"], "name": "add2"}})
    second = http.post(f"{server.url}/v1/rollout/init", json=init_body("m-2", trainer.url)).json()
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    assert [t["function"]["name"] for t in second["tools"]] == ["add", "add2"]


# -- auth ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (f"Bearer {KEY}", 202),
        (f"bearer {KEY}", 202),
        (f"BEARER   {KEY}", 202),
        (KEY, 202),  # raw token, as in 0.2
        (f"Basic {KEY}", 401),
        ("Bearer wrong", 401),
        ("Bearer", 401),
        ("", 401),
        (None, 401),
        ("Bearer cl\u00e9-\u00fc", 401),  # non-ASCII: a wrong key, not a crash
    ],
)
def test_init_auth_header_variants(serve, trainer: TrainerStandIn, authorization: str | None, status: int):
    server = serve(ScriptedAgent(), api_key=KEY)
    headers: dict[str, bytes] = {"content-type": b"application/json"}
    if authorization is not None:
        headers["authorization"] = authorization.encode("utf-8")  # raw bytes: non-ASCII goes out as is
    body = json.dumps(init_body(f"auth-{status}", trainer.url)).encode()
    with httpx.Client(timeout=10) as client:
        response = client.post(f"{server.url}/v1/rollout/init", content=body, headers=headers)
        assert response.status_code == status, response.text
        if status == 401:
            assert response.json() == {"detail": "Invalid or missing API key"}
        assert client.get(f"{server.url}/health").status_code == 200


def test_auth_is_checked_before_the_body(serve, http):
    server = serve(ScriptedAgent(), api_key=KEY)
    response = http.post(f"{server.url}/v1/rollout/init", content=b"{not json")
    assert response.status_code == 401  # auth before the body: an unauthenticated caller learns nothing
    authed = http.post(
        f"{server.url}/v1/rollout/init", content=b"{not json", headers={"Authorization": f"Bearer {KEY}"}
    )
    assert authed.status_code == 422


@pytest.mark.parametrize(
    ("api_key", "authorization", "status"),
    [
        (None, f"Bearer {KEY}", 404),
        (KEY, None, 401),
        (KEY, "Bearer nope", 401),
        (KEY, f"Bearer {KEY}", 200),
        (KEY, KEY, 200),
    ],
)
def test_platform_health(serve, http, api_key: str | None, authorization: str | None, status: int):
    server = serve(ScriptedAgent(), api_key=api_key)
    headers = {"Authorization": authorization} if authorization else {}
    response = http.get(f"{server.url}/platform/health", headers=headers)
    assert response.status_code == status
    expected = {
        404: {"detail": "Not found"},
        401: {"detail": "Invalid or missing API key"},
        200: http.get(f"{server.url}/health").json(),
    }[status]
    assert response.json() == expected


def test_docs_routes_are_off_by_default_and_on_when_asked(serve, http):
    plain = serve(ScriptedAgent())
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert http.get(plain.url + path).status_code == 404
    documented = serve(ScriptedAgent(), config=fast_config(docs_enabled=True))
    assert http.get(documented.url + "/openapi.json").status_code == 200


def test_wrong_method_and_unknown_path(serve, http):
    server = serve(ScriptedAgent())
    assert http.get(f"{server.url}/v1/rollout/init").status_code == 405
    assert http.post(f"{server.url}/nope").status_code == 404


# -- bad input -----------------------------------------------------------------------------------------

BIG_METADATA = {"blob": "x" * (1024 * 1024 + 10)}
NESTED: Any = "leaf"
for _ in range(900):  # deep, yet shallow enough for json.dumps
    NESTED = [NESTED]


def _bad_inputs(trainer_url: str) -> list[tuple[str, bytes, int, str]]:
    def body(**changes: Any) -> bytes:
        data = init_body("bad", trainer_url)
        data.update(changes)
        return json.dumps(data).encode()

    return [
        ("malformed json", b'{"rollout_id": ', 422, "json_invalid"),
        ("empty body", b"", 422, "missing"),
        ("json array", b"[1, 2]", 422, "model_attributes_type"),
        ("json null", b"null", 422, "model_attributes_type"),
        ("missing fields", b'{"rollout_id": "x"}', 422, "missing"),
        ("messages not a list", body(messages="hello"), 422, "list_type"),
        ("message not an object", body(messages=["hi"]), 422, "dict_type"),
        ("max_turns not int", body(max_turns="many"), 422, "int_parsing"),
        ("blank rollout id", body(rollout_id="   "), 422, "value_error"),
        ("rollout id too long", body(rollout_id="r" * 257), 422, "string_too_long"),
        ("ftp server_url", body(server_url="ftp://x"), 422, "value_error"),
        ("oversized metadata", body(metadata=BIG_METADATA), 422, "value_error"),
        ("huge message list", body(messages=[{"role": "user", "content": "x" * 100}] * 30000), 413, ""),
        ("invalid utf-8", b'{"rollout_id": "\xff\xfe"}', 400, ""),  # FastAPI's "error parsing the body"
        ("deeply nested json", b"[" * 100_000, 400, ""),
        ("metadata not an object", body(metadata=NESTED), 422, "dict_type"),
        ("json string", b'"rollout"', 422, "model_attributes_type"),
        ("callback key with a line break", body(api_key="key\r\nX-Injected: 1"), 422, "value_error"),
    ]


def test_bad_inputs_get_precise_4xx_and_the_server_keeps_serving(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent(), config=fast_config(max_request_bytes=2 * 1024 * 1024))
    for label, content, status, error_type in _bad_inputs(trainer.url):
        response = http.post(
            f"{server.url}/v1/rollout/init", content=content, headers={"content-type": "application/json"}
        )
        assert response.status_code == status, (label, response.text[:300])
        detail = response.json()["detail"]
        if status == 422:
            assert isinstance(detail, list) and detail, label
            assert all(set(item) <= {"type", "loc", "msg", "input", "ctx"} for item in detail), label
            assert all(item["loc"][0] == "body" for item in detail), label
            if error_type:
                assert error_type in {item["type"] for item in detail}, (label, detail)
        elif status == 413:
            assert "2097152 bytes" in detail
        else:
            assert detail == "There was an error parsing the body"
        assert http.get(f"{server.url}/health").status_code == 200, label
    assert http.get(f"{server.url}/health").json()["active_rollouts"] == 0


def test_422_messages_keep_the_0_2_texts(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent())
    body = init_body("   ", "ftp://host")
    detail = http.post(f"{server.url}/v1/rollout/init", json=body).json()["detail"]
    messages = {item["msg"] for item in detail}
    assert "Value error, rollout_id cannot be empty or whitespace only" in messages
    assert "Value error, server_url must use http or https scheme" in messages
    assert all(item.get("ctx", {}).get("error", {}) == {} for item in detail if item["type"] == "value_error")


def test_path_like_rollout_ids_are_accepted_as_opaque_ids(serve, http, trainer: TrainerStandIn, tmp_path):
    server = serve(ScriptedAgent(), debug_dir=str(tmp_path / "traces"))
    for rollout_id in ("../../etc/passwd", "/abs/path", "a/b\\c", "..", "ünï cödé"):
        response = http.post(f"{server.url}/v1/rollout/init", json=init_body(rollout_id, trainer.url))
        assert response.status_code == 202
        assert response.json()["rollout_id"] == rollout_id
        assert trainer.wait_completed(rollout_id)["status"] == "COMPLETED"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) == 5
    assert all(p.parent == tmp_path / "traces" for p in written)  # no id escapes the directory


def test_finished_records_are_pruned_after_the_ttl_and_the_key_can_run_again(serve, http, trainer):
    settings = fast_settings(cleanup_interval_seconds=0.05)
    server = serve(ScriptedAgent(), record_ttl_seconds=0.2, settings=settings)
    http.post(f"{server.url}/v1/rollout/init", json=init_body("ttl", trainer.url))
    trainer.wait_completed("ttl")
    _wait_idle(http, server.url)
    assert http.get(f"{server.url}/health").json()["completed_rollouts"] == 1
    wait_until(lambda: http.get(f"{server.url}/health").json()["completed_rollouts"] == 0, what="TTL pruning")
    http.post(f"{server.url}/v1/rollout/init", json=init_body("ttl", trainer.url))
    wait_until(lambda: len(trainer.completed_requests) == 2, what="a second run")


def test_queue_limit_and_grace_come_from_the_environment(serve, http, monkeypatch):
    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_MAX_QUEUED_ROLLOUTS", "0")
    server = serve(ScriptedAgent())
    assert http.get(f"{server.url}/health").json()["max_queued_rollouts"] == 0
    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_MAX_QUEUED_ROLLOUTS", "many")
    with pytest.raises(ValueError, match="max_queued_rollouts"):
        serve(ScriptedAgent())


@pytest.mark.parametrize(
    "make",
    [
        lambda: create_app(ScriptedAgent(), max_concurrent=0),
        lambda: create_app(ScriptedAgent(), max_concurrent=-1),
        lambda: create_app(ScriptedAgent(), record_ttl_seconds=0),
        lambda: create_app(ScriptedAgent(), settings=RolloutSettings(server={"max_queued_rollouts": -1})),
        lambda: create_app(ScriptedAgent(), config=fast_config(max_request_bytes=0)),
    ],
)
def test_create_app_rejects_nonsense_limits(make):
    with pytest.raises(ValueError):
        make()


def test_tools_exclude_none_drops_the_nulls(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent(), config=fast_config(tools_exclude_none=True))
    tool = http.post(f"{server.url}/v1/rollout/init", json=init_body("nn", trainer.url)).json()["tools"][0]
    assert tool["function"]["parameters"]["properties"]["a"] == {"type": "number"}
    assert tool["function"]["strict"] is False


def test_get_tools_never_runs_on_the_event_loop(serve, http, trainer: TrainerStandIn):
    on_loop: list[bool] = []  # whether each call ran on the server's event loop

    def tools(request: Any) -> list[dict[str, Any]]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            on_loop.append(False)
        else:
            on_loop.append(True)
        return [ADD_TOOL]

    server = serve(ScriptedAgent(tools=tools))
    for i in range(20):
        assert (
            http.post(f"{server.url}/v1/rollout/init", json=init_body(f"t-{i}", trainer.url)).status_code
            == 202
        )
    assert on_loop == [False] * 20


def test_a_body_without_content_type_is_read_as_json(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent())
    content = json.dumps(init_body("no-content-type", trainer.url)).encode()
    response = http.post(f"{server.url}/v1/rollout/init", content=content)
    assert response.request.headers.get("content-type") is None
    assert response.status_code == 202, response.text
    trainer.wait_completed("no-content-type")


def test_a_chunked_body_over_the_limit_is_refused_while_it_streams(serve, http, trainer: TrainerStandIn):
    server = serve(ScriptedAgent(), config=fast_config(max_request_bytes=64 * 1024))

    def chunks() -> Iterator[bytes]:
        yield b'{"rollout_id": "chunked", "metadata": {"blob": "'
        for _ in range(64):
            yield b"x" * 4096
        yield b'"}}'

    response = http.post(
        f"{server.url}/v1/rollout/init", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert response.status_code == 413
    assert "65536 bytes" in response.json()["detail"]
    small = json.dumps(init_body("chunked-ok", trainer.url)).encode()
    response = http.post(f"{server.url}/v1/rollout/init", content=iter([small[:10], small[10:]]))
    assert response.status_code == 202, response.text
    trainer.wait_completed("chunked-ok")


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/json", 202),  # validated in one step by the route
        ("application/json; charset=utf-8", 202),
        ("application/vnd.osmosis+json", 202),  # FastAPI's own body handling, same answer
        ("text/plain", 422),  # FastAPI does not read it as JSON
    ],
)
def test_init_answers_alike_whichever_path_reads_the_body(
    serve, http, trainer: TrainerStandIn, content_type: str, status: int
):
    server = serve(ScriptedAgent())
    rollout_id = f"ct-{content_type}"
    content = json.dumps(init_body(rollout_id, trainer.url)).encode()
    response = http.post(
        f"{server.url}/v1/rollout/init", content=content, headers={"content-type": content_type}
    )
    assert response.status_code == status, response.text
    if status == 202:
        assert response.headers["content-type"] == "application/json"
        assert response.json()["rollout_id"] == rollout_id
        assert response.json()["tools"][0]["function"]["name"] == ADD_TOOL["function"]["name"]
        trainer.wait_completed(rollout_id)
    else:
        assert response.json()["detail"][0]["type"] == "model_attributes_type"


@pytest.mark.parametrize("body", [b"Infinity", b"-Infinity", b"NaN", b'{"rollout_id": Infinity}'])
def test_a_body_with_non_finite_numbers_gets_422_not_500(serve, http, body: bytes):
    server = serve(ScriptedAgent())
    response = http.post(
        f"{server.url}/v1/rollout/init", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["detail"]
    assert http.get(f"{server.url}/health").status_code == 200  # the same connection still works


# -- get_tools off the loop, and the init admission limit --------------------------------------------


class GatedTools:
    """A synchronous get_tools that blocks the rollouts named in ``blocked`` until released, counting
    how many calls run at once."""

    def __init__(self, blocked: set[str] | None = None, fail: set[str] | None = None) -> None:
        self.blocked = blocked
        self.fail = fail or set()
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0

    def __call__(self, request: Any) -> list[dict[str, Any]]:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.blocked is None or request.rollout_id in self.blocked:
                self.release.wait(10)
            if request.rollout_id in self.fail:
                raise SystemExit(f"get_tools gave up on {request.rollout_id}")
            return [ADD_TOOL]
        finally:
            with self.lock:
                self.running -= 1


def _post_in_background(
    url: str, rollout_id: str, trainer_url: str, into: dict[str, int]
) -> threading.Thread:
    def post() -> None:
        with httpx.Client(timeout=20) as client:
            into[rollout_id] = client.post(
                f"{url}/v1/rollout/init", json=init_body(rollout_id, trainer_url)
            ).status_code

    thread = threading.Thread(target=post)
    thread.start()
    return thread


def test_a_get_tools_blocking_for_seconds_stalls_neither_health_nor_other_inits(
    serve, http, trainer: TrainerStandIn
):
    tools = GatedTools(blocked={"slow"}, fail={"raises"})
    server = serve(ScriptedAgent(tools=tools))
    statuses: dict[str, int] = {}
    slow = _post_in_background(server.url, "slow", trainer.url, statuses)
    wait_until(lambda: tools.running == 1, what="the slow get_tools to start")
    for i in range(5):
        response = http.post(f"{server.url}/v1/rollout/init", json=init_body(f"quick-{i}", trainer.url))
        assert response.status_code == 202
    assert (
        http.post(f"{server.url}/v1/rollout/init", json=init_body("raises", trainer.url)).status_code == 500
    )
    assert http.get(f"{server.url}/health").json()["status"] == "healthy"
    assert slow.is_alive() and tools.running == 1  # all of that happened while get_tools still blocked
    tools.release.set()
    slow.join(10)
    assert statuses == {"slow": 202}
    for rollout_id in ("slow", *(f"quick-{i}" for i in range(5))):
        assert trainer.wait_completed(rollout_id)["status"] == "COMPLETED"


def test_inits_beyond_max_concurrent_inits_wait_outside_and_all_get_their_answer(
    serve, http, trainer: TrainerStandIn
):
    tools = GatedTools()  # every call blocks until released
    server = serve(ScriptedAgent(tools=tools), config=fast_config(max_concurrent_inits=2))
    statuses: dict[str, int] = {}
    posts = [_post_in_background(server.url, f"w-{i}", trainer.url, statuses) for i in range(6)]
    wait_until(lambda: tools.running == 2, what="two inits in get_tools")
    time.sleep(0.3)  # time for more inits to get in, were they let in
    assert tools.running == 2
    assert http.get(f"{server.url}/health").json()["active_rollouts"] == 2  # the other four wait outside
    tools.release.set()
    for post in posts:
        post.join(10)
    assert statuses == {f"w-{i}": 202 for i in range(6)}
    assert tools.most_at_once == 2


def test_max_concurrent_inits_must_be_positive():
    with pytest.raises(RolloutValueError, match="max_concurrent_inits"):
        create_app(ScriptedAgent(), config=fast_config(max_concurrent_inits=0))


def test_an_init_whose_client_leaves_mid_body_starts_nothing_and_frees_its_admission(
    serve, http, trainer: TrainerStandIn
):
    server = serve(
        ScriptedAgent(), config=fast_config(max_concurrent_inits=1)
    )  # a slot kept would block the next init
    body = json.dumps(init_body("left-mid-body", trainer.url)).encode()
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    head = f"POST /v1/rollout/init HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    with socket.create_connection((host, int(port)), timeout=5) as client:
        client.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:20])
        time.sleep(0.2)  # the server has read the head and the first part of the body
    health = http.get(f"{server.url}/health").json()
    assert health["active_rollouts"] == 0 and health["completed_rollouts"] == 0
    response = http.post(f"{server.url}/v1/rollout/init", content=body)
    assert response.status_code == 202, response.text
    trainer.wait_completed("left-mid-body")


def test_an_app_mounted_under_a_prefix_keeps_its_gate(http, trainer: TrainerStandIn):
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from tests.support.server import RunningServer

    outer = Starlette(
        routes=[Mount("/rollouts", app=create_app(ScriptedAgent(), api_key=KEY, settings=fast_settings()))]
    )
    server = RunningServer(outer).start()
    try:
        init = f"{server.url}/rollouts/v1/rollout/init"
        assert http.post(init, content=b"{not json").status_code == 401  # the key before the body
        headers = {"Authorization": f"Bearer {KEY}"}
        response = http.post(init, json=init_body("mounted", trainer.url), headers=headers)
        assert response.status_code == 202, response.text
        assert trainer.wait_completed("mounted")["status"] == "COMPLETED"
    finally:
        server.stop()
