"""Address helpers (pure tables) and public-IP detection against loopback stand-ins of the services."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from osmosis_ai.rollout import network
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError
from osmosis_ai.rollout.network import (
    PublicIPDetectionError,
    adetect_public_ip,
    detect_from_cloud_metadata,
    detect_from_external_services,
    detect_public_ip,
    is_private_ip,
    is_valid_hostname_or_ip,
    validate_ipv4,
)
from tests.support.sockets import free_port

AWS_TOKEN = "/latest/api/token"
AWS_IP = "/latest/meta-data/public-ipv4"
GCP_IP = "/computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip"
AZURE_IP = "/metadata/instance/network/interface/0/ipv4/ipAddress/0/publicIpAddress"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("8.8.8.8", True),
        ("0.0.0.0", True),
        ("256.1.1.1", False),
        ("1.2.3", False),
        ("::1", False),
        ("", False),
    ],
)
def test_validate_ipv4(value: str, valid: bool) -> None:
    assert validate_ipv4(value) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("example.com", True),
        ("my_host.internal", True),
        ("localhost:9000", True),
        ("10.0.0.1:8080", True),
        ("a" * 63 + ".com", True),
        ("a" * 64 + ".com", False),
        ("-bad.com", False),
        ("bad-.com", False),
        ("trailing.dot.", False),
        ("two..dots", False),
        ("::1", False),
        ("", False),
        ("a." * 130, False),
        ("ex ample.com", False),
    ],
)
def test_is_valid_hostname_or_ip(value: str, valid: bool) -> None:
    assert is_valid_hostname_or_ip(value) is valid


@pytest.mark.parametrize(
    ("ip", "private"),
    [
        ("10.1.2.3", True),
        ("192.168.0.1", True),
        ("172.16.5.4", True),
        ("127.0.0.1", True),
        ("169.254.169.254", True),
        ("fd00::1", True),
        ("8.8.8.8", False),
        ("2001:4860:4860::8888", False),
        ("not an ip", False),
    ],
)
def test_is_private_ip(ip: str, private: bool) -> None:
    assert is_private_ip(ip) is private


# -- detection against loopback stand-ins ---------------------------------------------------------------


@dataclass
class Route:
    """``gate``: the answer waits until the test sets it (a probe that is slower than the whole test)."""

    status: int = 200
    body: str = ""
    delay: float = 0.0
    gate: threading.Event | None = None


@dataclass
class FakeServices:
    """One loopback HTTP server standing in for the metadata endpoint and the echo services."""

    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    url: str = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        services = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                path = self.path.split("?")[0]
                services.seen.append(
                    (self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
                )
                route = services.routes.get(path, Route(status=404))
                if route.gate is not None:
                    route.gate.wait(60)
                time.sleep(route.delay)
                data = route.body.encode()
                try:
                    self.send_response(route.status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the probe gave up waiting
                services.answered.append(path)

            do_GET = do_PUT = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def services(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServices]:
    fake = FakeServices()
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(network, "METADATA_BASE_URL", fake.url)
    monkeypatch.setattr(network, "EXTERNAL_IP_SERVICES", (f"{fake.url}/echo1", f"{fake.url}/echo2"))
    monkeypatch.setattr(network, "CLOUD_REQUEST_TIMEOUT", 1.0)
    monkeypatch.setattr(network, "EXTERNAL_REQUEST_TIMEOUT", 1.0)
    # The process-wide cache may hold another test's answer: each test's first detection refreshes it.
    yield fake
    for route in fake.routes.values():
        if route.gate is not None:
            route.gate.set()
    server.shutdown()
    server.server_close()


def test_first_cloud_answer_wins_without_waiting_for_slow_probes(services: FakeServices) -> None:
    services.routes[AWS_TOKEN] = Route(body="token", gate=threading.Event())  # answers after the test
    services.routes[GCP_IP] = Route(body="203.0.113.7")
    assert detect_public_ip(refresh=True) == "203.0.113.7"
    assert AWS_TOKEN in [s[1] for s in services.seen]  # the AWS probe ran, and is still unanswered
    assert AWS_TOKEN not in services.answered
    gcp = next(s for s in services.seen if s[1].startswith(GCP_IP))
    assert gcp[2]["metadata-flavor"] == "Google"


def test_aws_imdsv2_uses_a_token(services: FakeServices) -> None:
    services.routes[AWS_TOKEN] = Route(body="tok-123")
    services.routes[AWS_IP] = Route(body="198.51.100.9\n")
    assert detect_from_cloud_metadata() == "198.51.100.9"
    put = next(s for s in services.seen if s[0] == "PUT")
    assert put[2]["x-aws-ec2-metadata-token-ttl-seconds"] == "60"
    get = next(s for s in services.seen if s[1] == AWS_IP)
    assert get[2]["x-aws-ec2-metadata-token"] == "tok-123"


def test_azure_query_and_header(services: FakeServices) -> None:
    services.routes[AZURE_IP] = Route(body="192.0.2.44")
    assert detect_from_cloud_metadata() == "192.0.2.44"
    azure = next(s for s in services.seen if s[1].startswith(AZURE_IP))
    assert azure[1].endswith("?api-version=2021-02-01&format=text")
    assert azure[2]["metadata"] == "true"


def test_falls_back_to_echo_services_and_ignores_garbage(services: FakeServices) -> None:
    services.routes["/echo1"] = Route(body="<html>not an ip</html>")
    services.routes["/echo2"] = Route(body=" 198.51.100.4\n", delay=0.1)
    assert detect_public_ip(refresh=True) == "198.51.100.4"


def test_result_is_cached_until_refresh(services: FakeServices) -> None:
    services.routes[GCP_IP] = Route(body="203.0.113.7")
    assert detect_public_ip(refresh=True) == "203.0.113.7"
    count = len(services.seen)
    assert detect_public_ip() == "203.0.113.7"
    assert len(services.seen) == count
    services.routes[GCP_IP] = Route(body="203.0.113.8")
    assert detect_public_ip(refresh=True) == "203.0.113.8"


def test_failure_is_bounded_by_the_wall_timeouts_and_explained(
    services: FakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    services.routes[GCP_IP] = Route(body="203.0.113.7")
    assert detect_public_ip(refresh=True) == "203.0.113.7"  # a good answer in the cache
    # The probes answer only after the test: with per-request timeouts longer than the test's own
    # timeout, only the wall timeouts can end the detection.
    monkeypatch.setattr(network, "CLOUD_REQUEST_TIMEOUT", 600.0)
    monkeypatch.setattr(network, "EXTERNAL_REQUEST_TIMEOUT", 600.0)
    monkeypatch.setattr(network, "CLOUD_WALL_TIMEOUT", 0.3)
    monkeypatch.setattr(network, "EXTERNAL_WALL_TIMEOUT", 0.3)
    services.routes[GCP_IP] = Route(body="203.0.113.8", gate=threading.Event())
    services.routes["/echo1"] = Route(body="198.51.100.4", gate=threading.Event())
    with pytest.raises(PublicIPDetectionError, match="explicitly") as exc:
        detect_public_ip(refresh=True)
    assert isinstance(exc.value, OsmosisRolloutError)
    assert [p for p in services.answered if p in (GCP_IP, "/echo1")] == [GCP_IP]  # only the priming one
    # The failure neither cached anything nor dropped the good answer: no new request is made.
    asked = len(services.seen)
    assert detect_public_ip() == "203.0.113.7"
    assert len(services.seen) == asked


def _dead_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()  # nothing listens there
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")


def test_metadata_services_are_asked_without_the_environment_proxy(
    services: FakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dead_proxy(monkeypatch)
    services.routes[GCP_IP] = Route(body="203.0.113.7")
    assert detect_from_cloud_metadata() == "203.0.113.7"


def test_echo_services_are_asked_through_the_environment_proxy(
    services: FakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dead_proxy(monkeypatch)
    services.routes["/echo1"] = Route(body="198.51.100.4")
    assert detect_from_external_services() is None  # the proxy does not answer
    assert not any(path == "/echo1" for _, path, _ in services.seen)


async def test_detection_from_async_code_runs_on_the_callers_loop(services: FakeServices) -> None:
    services.routes[GCP_IP] = Route(body="203.0.113.7")
    assert await adetect_public_ip(refresh=True) == "203.0.113.7"
    assert detect_public_ip() == "203.0.113.7"  # the same cache
