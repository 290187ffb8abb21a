"""The outgoing-HTTP seam against real loopback servers: retries, Retry-After, the shared bounded pool."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest

from osmosis_ai._http import (
    RETRYABLE_STATUSES,
    NoAnswer,
    Pool,
    Response,
    RetryPolicy,
    aclose_shared_transport,
    get_shared_transport,
    holding_shared_pools,
    is_retryable_status,
    parse_retry_after,
    retry_after_from,
    retrying,
    set_transport,
    shared_pool,
)
from osmosis_ai._sync import run_sync
from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.config import RolloutClientSettings
from osmosis_ai.rollout.core.schemas import RolloutRequest
from osmosis_ai.traingate.launcher import InitRejected, RolloutLauncher, ServerUnreachable
from tests.support.threaded_server import InFlight, StandInServer, read_body, send_json_bytes

INIT_OK = json.dumps({"rollout_id": "r", "tools": []}).encode()
CHAT_OK = json.dumps(
    {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
).encode()


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    release: threading.Event | None = None  # answered once set (at most 30 s later)


class ScriptedServer(StandInServer):
    """Answers queued :class:`Answer` s in order (then ``default``); records requests and peak concurrency."""

    thread_name = "http-seam-stand-in"

    def __init__(self) -> None:
        self.default = Answer()
        self.queue: list[Answer] = []
        self.requests: list[dict[str, Any]] = []
        self.in_flight = InFlight()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, *answers: Answer) -> None:
        with self._lock:
            self.queue.extend(answers)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        with self._lock:
            answer = self.queue.pop(0) if self.queue else self.default
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            self.requests.append(
                {"method": scope["method"], "path": scope["path"], "headers": headers, "body": body}
            )
        with self.in_flight:
            if answer.delay:
                await asyncio.sleep(answer.delay)
            if answer.release is not None:
                await asyncio.to_thread(answer.release.wait, 30)
            await send_json_bytes(send, answer.status, answer.body, answer.headers)


@pytest.fixture(scope="module")
def _server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def server(_server: ScriptedServer) -> Iterator[ScriptedServer]:
    _server.default, _server.queue, _server.requests = Answer(), [], []
    _server.in_flight.reset()
    yield _server


@pytest.fixture(autouse=True)
async def _close_pools() -> AsyncIterator[None]:
    yield
    set_transport(None)
    await aclose_shared_transport()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def recording_retry(sleeps: list[float]) -> RetryPolicy:
    """A policy that records the waits it is asked for instead of waiting."""

    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    return RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.04, sleep=record)


def _launcher(server: ScriptedServer, retry: RetryPolicy) -> RolloutLauncher:
    return RolloutLauncher(server.url, api_key="k", retry=retry)


def _init_request() -> RolloutRequest:
    return RolloutRequest(
        rollout_id="r",
        server_url="http://127.0.0.1:1",
        messages=[{"role": "user", "content": "hi"}],
        completion_params={},
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed when the block ends: nothing listens there


# -- the status table ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 599])
def test_retryable_statuses(status: int) -> None:
    assert is_retryable_status(status) and status in RETRYABLE_STATUSES


@pytest.mark.parametrize("status", [200, 204, 301, 400, 401, 403, 404, 409, 410, 422, 600])
def test_other_statuses_are_not_retryable(status: int) -> None:
    assert not is_retryable_status(status)


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
async def test_each_retryable_status_is_asked_again(
    server: ScriptedServer, recording_retry: RetryPolicy, sleeps: list[float], status: int
) -> None:
    server.answer(Answer(status=status, body=b'{"detail": "later"}'), Answer(status=202, body=INIT_OK))
    init = await _launcher(server, recording_retry).init(_init_request())
    assert init.rollout_id == "r"
    assert [r["path"] for r in server.requests] == ["/v1/rollout/init"] * 2
    assert len(sleeps) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
async def test_other_4xx_are_not_asked_again(
    server: ScriptedServer, recording_retry: RetryPolicy, sleeps: list[float], status: int
) -> None:
    server.answer(Answer(status=status, body=b'{"detail": "no"}'))
    with pytest.raises(InitRejected) as caught:
        await _launcher(server, recording_retry).init(_init_request())
    assert caught.value.status == status
    assert len(server.requests) == 1 and sleeps == []


async def test_retries_are_bounded_by_max_attempts(
    server: ScriptedServer, recording_retry: RetryPolicy, sleeps: list[float]
) -> None:
    server.default = Answer(status=503)
    with pytest.raises(InitRejected) as caught:
        await _launcher(server, recording_retry).init(_init_request())
    assert caught.value.status == 503
    assert len(server.requests) == recording_retry.max_attempts
    assert len(sleeps) == recording_retry.max_attempts - 1


async def test_no_answer_is_retried_then_reported(recording_retry: RetryPolicy, sleeps: list[float]) -> None:
    launcher = RolloutLauncher(f"http://127.0.0.1:{_free_port()}", retry=recording_retry)
    with pytest.raises(ServerUnreachable, match="is it running"):
        await launcher.init(_init_request())
    assert len(sleeps) == recording_retry.max_attempts - 1


# -- Retry-After ---------------------------------------------------------------------------------------


def _http_date(offset_seconds: float) -> str:
    return format_datetime(datetime.now(timezone.utc) + timedelta(seconds=offset_seconds), usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", 3.0),
        (" 0.25 ", 0.25),
        ("0", 0.0),
        ("-4", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    parsed = parse_retry_after(_http_date(30))
    assert parsed is not None and 25 <= parsed <= 31
    assert parse_retry_after(_http_date(-30)) == 0.0  # a date in the past means "now"


def test_retry_after_from_headers() -> None:
    assert retry_after_from({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_from({"Retry-After": "4"}) == 4.0  # a plain dict, any case
    assert retry_after_from({"retry-after-ms": "nan", "retry-after": "2"}) == 2.0
    assert retry_after_from({}) is None
    assert retry_after_from(None) is None


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [("7", 7.0, 7.0), ("http-date", 25.0, 31.0), ("nan", 0.005, 0.01), ("-3", 0.005, 0.01)],
)
async def test_retry_after_is_honoured_from_a_real_answer(
    server: ScriptedServer,
    recording_retry: RetryPolicy,
    sleeps: list[float],
    header: str,
    low: float,
    high: float,
) -> None:
    value = _http_date(30) if header == "http-date" else header
    server.answer(Answer(status=429, headers={"Retry-After": value}), Answer(status=202, body=INIT_OK))
    await _launcher(server, recording_retry).init(_init_request())
    (wait,) = sleeps
    assert low <= wait <= high  # unusable hints fall back to the back-off (base 0.01, with jitter)


def test_delay_is_the_backoff_or_the_longer_hint_capped() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, max_retry_after=10.0, jitter=False)
    assert [policy.delay(attempt) for attempt in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.delay(1, retry_after=3.0) == 3.0  # longer than the back-off: the hint wins
    assert policy.delay(3, retry_after=0.5) == 4.0  # shorter: never sooner than our back-off
    assert policy.delay(1, retry_after=600.0) == 10.0  # capped
    jittered = RetryPolicy(base_delay=1.0, max_delay=5.0)
    assert all(2.0 <= jittered.delay(3) <= 4.0 for _ in range(50))  # drawn from the upper half


class Flaky(Exception):
    def __init__(self, hint: float | None = None) -> None:
        super().__init__("flaky")
        self.hint = hint


def _script(*outcomes: Any) -> Any:
    """An attempt that raises or returns each outcome in turn (an exception instance is raised)."""
    remaining = list(outcomes)

    async def attempt() -> Any:
        outcome = remaining.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return attempt


async def test_retrying_asks_again_until_an_attempt_succeeds(
    recording_retry: RetryPolicy, sleeps: list[float]
) -> None:
    retried: list[tuple[int, str]] = []
    result = await retrying(
        _script(Flaky(), Flaky(hint=0.5), "done"),
        recording_retry,
        retryable=lambda exc: isinstance(exc, Flaky),
        retry_after=lambda exc: exc.hint if isinstance(exc, Flaky) else None,
        on_retry=lambda number, exc, wait: retried.append((number, str(exc))),
    )
    assert result == "done" and retried == [(1, "flaky"), (2, "flaky")]
    assert 0.005 <= sleeps[0] <= 0.01 and sleeps[1] == 0.5  # the back-off, then the longer hint


async def test_retrying_raises_what_is_not_retryable_and_the_last_failure(
    recording_retry: RetryPolicy, sleeps: list[float]
) -> None:
    refused = ValueError("refused")
    with pytest.raises(ValueError) as caught:
        await retrying(_script(refused), recording_retry, retryable=lambda exc: isinstance(exc, Flaky))
    assert caught.value is refused and sleeps == []
    last = Flaky()
    with pytest.raises(Flaky) as exhausted:
        await retrying(_script(Flaky(), Flaky(), last), recording_retry, retryable=lambda exc: True)
    assert exhausted.value is last and len(sleeps) == recording_retry.max_attempts - 1


async def test_retrying_gives_up_before_a_wait_it_is_told_is_pointless(
    recording_retry: RetryPolicy, sleeps: list[float]
) -> None:
    first = Flaky(hint=30.0)
    with pytest.raises(Flaky) as caught:
        await retrying(
            _script(first, "never reached"),
            recording_retry,
            retryable=lambda exc: True,
            retry_after=lambda exc: exc.hint if isinstance(exc, Flaky) else None,
            give_up=lambda wait: wait > 1.0,  # a deadline one second away
        )
    assert caught.value is first and sleeps == []


# -- the shared pool ------------------------------------------------------------------------------------


async def test_one_pool_per_loop_and_size_reused() -> None:
    assert shared_pool(5) is shared_pool(5)
    assert shared_pool(5) is not shared_pool(7)
    assert shared_pool(5).max_connections == 5


async def test_closing_the_shared_pools_and_reopening(server: ScriptedServer) -> None:
    pool = shared_pool(3)
    assert (await pool.request("GET", server.url + "/a", timeout=5.0)).status == 200
    assert not pool.closed
    await aclose_shared_transport()
    await aclose_shared_transport()  # idempotent
    assert pool.closed
    again = shared_pool(3)
    assert again is not pool
    assert (await again.request("GET", server.url + "/b", timeout=5.0)).status == 200


async def _queued_for_a_connection(pool: Pool) -> None:
    """Until a request of ``pool`` waits in aiohttp's queue for a connection."""
    while not (pool._session is not None and any(pool._session.connector._waiters.values())):  # type: ignore[union-attr]
        await asyncio.sleep(0.005)


async def test_a_request_queued_when_its_pool_closes_gets_no_answer(server: ScriptedServer) -> None:
    """aiohttp cancels a request waiting for a connection when its pool closes: the request ends
    with NoAnswer, never as a cancellation of the task that sent it."""
    release = threading.Event()
    server.default = Answer(release=release)
    pool = shared_pool(1)
    held = asyncio.create_task(pool.request("GET", server.url + "/held", timeout=30.0))
    queued = asyncio.create_task(pool.request("GET", server.url + "/queued", timeout=30.0))
    await _queued_for_a_connection(pool)
    await aclose_shared_transport()
    release.set()
    with pytest.raises(NoAnswer, match="pool closed"):
        await queued
    assert not queued.cancelled()
    with pytest.raises(NoAnswer):
        await held


async def test_the_shared_pools_close_when_their_last_holder_leaves(server: ScriptedServer) -> None:
    pool = shared_pool(3)
    async with holding_shared_pools():
        async with holding_shared_pools():
            assert (await pool.request("GET", server.url, timeout=5.0)).status == 200
        assert not pool.closed  # another holder (a second server in this loop) is still using them
        assert (await pool.request("GET", server.url, timeout=5.0)).status == 200
    assert pool.closed


def test_a_pool_closes_itself_when_its_loop_shuts_down(server: ScriptedServer) -> None:
    pools: list[Pool] = []

    async def forgetful_user() -> None:  # never calls aclose_shared_transport()
        pool = shared_pool()
        await pool.request("GET", server.url, timeout=5.0)
        pools.append(pool)
        assert not pool.closed

    asyncio.run(forgetful_user())
    assert pools[0].closed

    async def next_loop() -> Pool:
        return shared_pool()

    assert asyncio.run(next_loop()) is not pools[0]  # a new loop gets its own pool


async def test_the_pool_bounds_concurrent_connections(server: ScriptedServer) -> None:
    server.default = Answer(delay=0.1)
    pool = shared_pool(2)
    answers = await asyncio.gather(*(pool.request("GET", f"{server.url}/{i}", timeout=5.0) for i in range(6)))
    assert [a.status for a in answers] == [200] * 6
    assert server.in_flight.peak == 2


async def test_the_timeout_does_not_count_the_wait_for_a_connection(server: ScriptedServer) -> None:
    # One connection, held by a first request until the second has waited for it twice its timeout:
    # the second still succeeds, because the timeout bounds the answer only (which comes at once).
    release = threading.Event()
    server.answer(Answer(release=release))
    pool = Pool(max_connections=1)
    try:
        holder = asyncio.ensure_future(pool.request("GET", server.url, timeout=30.0))
        while not server.requests:
            await asyncio.sleep(0.01)
        queued = asyncio.ensure_future(pool.request("GET", server.url, timeout=0.5))
        await asyncio.sleep(1.0)  # the time the queued request spends waiting for the connection
        release.set()
        answers = await asyncio.gather(holder, queued)
    finally:
        release.set()
        await pool.aclose()
    assert [a.status for a in answers] == [200] * 2
    assert server.in_flight.peak == 1


async def test_a_cancelled_request_gives_its_connection_back(server: ScriptedServer) -> None:
    server.answer(Answer(delay=5.0))  # the holder's; later requests get the default answer
    pool = Pool(max_connections=1)
    try:
        holder = asyncio.create_task(pool.request("GET", server.url, timeout=10.0))
        queued = asyncio.create_task(pool.request("GET", server.url, timeout=10.0))
        while not server.requests:
            await asyncio.sleep(0.01)
        queued.cancel()
        holder.cancel()
        answer = await asyncio.wait_for(pool.request("GET", server.url, timeout=10.0), 5.0)
    finally:
        await pool.aclose()
    assert answer.status == 200
    assert len(server.requests) == 2  # the cancelled waiter never reached the server


async def test_an_answer_carries_status_body_and_retry_after(server: ScriptedServer) -> None:
    server.answer(Answer(status=429, body=b"slow down", headers={"Retry-After": "7"}))
    answer = await shared_pool().request("POST", server.url + "/x", body=b"{}", timeout=5.0)
    assert answer == Response(429, b"slow down", "7")
    (request,) = server.requests
    assert request["method"] == "POST" and request["body"] == b"{}"
    assert request["headers"]["user-agent"].startswith("osmosis-ai/")


async def test_no_answer_tells_a_timeout_from_a_refused_connection(server: ScriptedServer) -> None:
    server.answer(Answer(delay=2.0))
    with pytest.raises(NoAnswer) as slow:
        await shared_pool().request("GET", server.url, timeout=0.2)
    assert slow.value.timed_out
    with pytest.raises(NoAnswer, match="Connect") as refused:
        await shared_pool().request("GET", f"http://127.0.0.1:{_free_port()}/", timeout=2.0)
    assert not refused.value.timed_out


async def test_redirects_are_followed_only_when_asked(server: ScriptedServer) -> None:
    server.answer(
        Answer(status=302, headers={"Location": "/elsewhere"}), Answer(status=302, headers={"Location": "/b"})
    )
    assert (await shared_pool().request("GET", server.url + "/a", timeout=5.0)).status == 302
    followed = await shared_pool().request("GET", server.url + "/a", timeout=5.0, follow_redirects=True)
    assert followed.status == 200
    assert [r["path"] for r in server.requests] == ["/a", "/a", "/b"]


# -- the rollout client's seam -----------------------------------------------------------------------


class _Recorder:
    """A transport that answers every callback itself (what ``testing.py``'s mock trainer does)."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.closed = False

    async def post(
        self, url: str, body: bytes, headers: Any, timeout: float, connect_timeout: float
    ) -> Response:
        self.urls.append(url)
        return Response(200, CHAT_OK if url.endswith("/chat/completions") else b"{}", None)

    async def aclose(self) -> None:
        self.closed = True


async def test_set_transport_routes_rollout_callbacks(server: ScriptedServer) -> None:
    recorder = _Recorder()
    assert set_transport(recorder) is None
    assert get_shared_transport() is recorder
    client = OsmosisLLMClient("http://traingate.test", "r")
    assert (await client.chat_completions([{"role": "user", "content": "hi"}])).content == "ok"
    await client.complete_rollout("COMPLETED", [])
    assert recorder.urls == [
        "http://traingate.test/v1/chat/completions",
        "http://traingate.test/v1/rollout/completed",
    ]
    assert set_transport(None) is recorder
    assert get_shared_transport() is shared_pool()


async def test_rollout_client_retries_through_the_shared_pool(server: ScriptedServer) -> None:
    server.answer(Answer(status=503), Answer(body=CHAT_OK))
    settings = RolloutClientSettings(retry_base_delay=0.1, retry_max_delay=1.0)
    client = OsmosisLLMClient(server.url, "r", settings=settings)
    assert (await client.chat_completions([{"role": "user", "content": "hi"}])).content == "ok"
    assert len(server.requests) == 2


# -- from synchronous code -----------------------------------------------------------------------------


def test_run_sync_returns_and_raises(server: ScriptedServer) -> None:
    async def fetch() -> int:
        return (await shared_pool().request("GET", server.url, timeout=5.0)).status

    assert run_sync(fetch()) == 200

    async def fail() -> None:
        raise LookupError("boom")

    with pytest.raises(LookupError, match="boom"):
        run_sync(fail())


async def test_run_sync_works_from_inside_a_running_loop(server: ScriptedServer) -> None:
    async def fetch() -> int:
        return (await shared_pool().request("GET", server.url, timeout=5.0)).status

    assert run_sync(fetch()) == 200  # blocks this loop briefly; the request runs on a private one


def test_a_command_line_and_settings_are_recorded_without_their_secrets() -> None:
    from osmosis_ai._http import redact_command, redact_config

    argv = ["osmosis", "eval", "--api-key", "sk-abc", "--baseline-api-key=xyz", "--max-tokens", "5",
            "--base-url", "https://me:pass@host/v1?api_key=k1&x=1", "--model", "sk-proj-0123456789abcdef", "-d", "d.jsonl"]  # fmt: skip
    assert redact_command(argv) == [
        "osmosis", "eval", "--api-key", "[redacted]", "--baseline-api-key=[redacted]", "--max-tokens", "5",
        "--base-url", "https://me:[redacted]@host/v1?api_key=[redacted]&x=1", "--model", "[redacted]", "-d", "d.jsonl",
    ]  # fmt: skip
    config = {"hf_token": "t", "auth": "a", "tags": ["ghp_0123456789abcdef"], "nested": {"password": "p"},
              "max_tokens": 3, "authors": "me"}  # fmt: skip
    assert redact_config(config) == {
        "tags": ["[redacted]"],
        "nested": {},
        "max_tokens": 3,
        "authors": "me",
    }
