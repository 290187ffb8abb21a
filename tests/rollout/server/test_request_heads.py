"""Request heads are bounded before authentication (431 past 16 KiB or 100 fields; an endless header is
cut off, /health keeps answering), and a 422 for a huge init echoes kilobytes, validated off the loop."""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from osmosis_ai.rollout.server.app import create_app
from osmosis_ai.rollout.server.runner import head_limited_protocol
from tests.support.server import ScriptedAgent, fast_config, init_body
from tests.support.threaded_server import ThreadedServer

KEY = "osm_rollout_request-heads-test-key"
STREAMS = 3  # connections streaming an endless header at once


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadedServer]:
    """The app behind the protocol ``osmosis serve`` runs, with the default limits."""
    app = create_app(ScriptedAgent(), config=fast_config(api_key=KEY))
    with ThreadedServer(app, lifespan="on", http=head_limited_protocol(10.0)) as running:
        yield running


def _exchange(server: ThreadedServer, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and b"connection: close" not in answer.lower():
                break
        return answer


def _head(fields: int, value: bytes = b"v") -> bytes:
    lines = b"".join(b"X-F%d: %s\r\n" % (index, value) for index in range(fields))
    return b"GET /health HTTP/1.1\r\nHost: x\r\n" + lines + b"Connection: close\r\n\r\n"


def test_a_head_over_100_fields_or_16_kib_gets_431_before_authentication(server: ThreadedServer) -> None:
    assert _exchange(server, _head(90)).startswith(b"HTTP/1.1 200")
    assert _exchange(server, _head(1, b"v" * 15_000)).startswith(b"HTTP/1.1 200")
    for head in (_head(101), _head(100_000), _head(1, b"v" * 17_000)):
        answer = _exchange(server, head)
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large"), answer[:80]
    init = b"POST /v1/rollout/init HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
    answer = _exchange(server, init + b"".join(b"X-F%d: v\r\n" % i for i in range(200)) + b"\r\n{}")
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]  # not 401: the head is refused first


def _health_latency(url: str) -> float:
    started = time.perf_counter()
    assert httpx.get(url, timeout=30).status_code == 200
    return time.perf_counter() - started


def test_endless_headers_are_cut_off_and_health_keeps_answering(server: ThreadedServer) -> None:
    health = f"{server.url}/health"
    baseline = statistics.median(_health_latency(health) for _ in range(20))
    sent: list[int] = []

    def stream() -> None:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Endless: ")
            sock.setblocking(False)
            total, answer = 0, b""
            while total < 64 * 1024 * 1024 and not answer:  # a bound on the test, far past the limit
                try:
                    total += sock.send(b"a" * 65536)
                except BlockingIOError:
                    time.sleep(0.001)
                with contextlib.suppress(BlockingIOError):
                    answer = sock.recv(12)
            sent.append(total)
            assert answer.startswith(b"HTTP/1.1 431"), answer

    streams = [threading.Thread(target=stream) for _ in range(STREAMS)]
    for thread in streams:
        thread.start()
    during = [_health_latency(health) for _ in range(10)]
    for thread in streams:
        thread.join(30)
    # refused long before 64 MiB (what was sent includes the kernel's socket buffers, a few MiB)
    assert len(sent) == STREAMS and max(sent) < 16 * 1024 * 1024, sent
    assert statistics.median(during) / baseline < 5


def test_a_422_for_100_000_metadata_keys_echoes_kilobytes_while_health_answers(
    server: ThreadedServer,
) -> None:
    body = init_body("huge-metadata", "http://127.0.0.1:9", metadata={f"k{i}": i for i in range(100_000)})
    content = json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    health = f"{server.url}/health"
    baseline = statistics.median(_health_latency(health) for _ in range(20))
    answers: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{server.url}/v1/rollout/init", content=content, headers=headers, timeout=120)
        )
    )
    sender.start()
    slowest = 0.0
    while sender.is_alive():
        slowest = max(slowest, _health_latency(health))
    sender.join()
    (answer,) = answers
    assert answer.status_code == 422
    assert len(answer.content) < 16 * 1024, len(answer.content)  # not the megabytes sent
    (error,) = answer.json()["detail"]
    assert error["loc"] == ["body", "metadata"] and "metadata size exceeds" in error["msg"]
    # How long /health waited is printed, not asserted: pydantic holds the GIL while it parses, so the
    # figure follows the machine's load (0.5-0.65x one validation of the body quiet, 5x under load).
    print(f"/health during the 422: slowest {slowest / baseline:.0f}x its median alone")
