"""Platform registration against a stand-in Platform on loopback (``OSMOSIS_PLATFORM_URL`` points at it)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from osmosis_ai._sockets import bind_listener
from osmosis_ai.rollout.server.app import create_app
from osmosis_ai.rollout.server.registration import (
    PlatformCredentials,
    RegistrationResult,
    aregister_with_platform,
    load_credentials,
    register_with_platform,
)
from tests.support.server import (
    PlatformStandIn,
    RunningServer,
    ScriptedAgent,
    fast_settings,
)

KEY = "osm_rollout_registration-key"


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[PlatformStandIn]:
    stand_in = PlatformStandIn()
    stand_in.server.start()
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", stand_in.server.url + "/")
    yield stand_in
    stand_in.server.stop()


def test_server_registers_once_ready_and_hands_the_result_over(platform, capsys):
    sock = bind_listener()
    port = sock.getsockname()[1]
    results: list[RegistrationResult] = []
    app = create_app(
        ScriptedAgent(),
        settings=fast_settings(),
        api_key=KEY,
        credentials=PlatformCredentials("platform-token"),
        server_host="127.0.0.1",
        server_port=port,
        on_registration=results.append,
    )
    server = RunningServer(app, sock).start()
    try:
        deadline = time.monotonic() + 5
        while not results and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        server.stop()
    assert len(platform.calls) == 1
    call = platform.calls[0]
    assert call["json"] == {"host": "127.0.0.1", "port": port, "agent_loop_name": "scripted", "api_key": KEY}
    assert call["headers"]["authorization"] == "Bearer platform-token"
    assert call["headers"]["user-agent"].startswith("osmosis-cli/")
    (result,) = results
    assert (result.success, result.is_healthy, result.server_id) == (True, True, "srv-1")
    captured = capsys.readouterr()
    assert captured.out == captured.err == ""  # the library prints nothing; `osmosis serve` renders it


@pytest.mark.parametrize(
    ("reply", "success", "status", "error_part"),
    [
        ((401, {"detail": "expired"}), False, "error", "osmosis login"),
        ((500, {"detail": "down"}), False, "error", "HTTP 500"),
        ((200, b"not json"), False, "error", "not JSON"),
        (
            (200, {"id": "s", "status": "unhealthy", "health_check_result": None}),
            True,
            "unhealthy",
            "health-check",
        ),
        (
            (200, {"id": "s", "status": "unhealthy", "health_check_result": {"error": "refused"}}),
            True,
            "unhealthy",
            "refused",
        ),
        ((200, ["a list"]), False, "error", "unexpected body"),
    ],
)
async def test_registration_outcomes(platform, reply, success, status, error_part):
    platform.reply = reply
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", PlatformCredentials("t"), api_key=None)
    assert (result.success, result.status) == (success, status)
    assert error_part in (result.error or "")
    assert "api_key" not in platform.calls[0]["json"]  # omitted when the server has no key


def test_the_synchronous_form_registers_too(platform):
    platform.reply = (200, {"id": "srv-9", "status": "healthy", "health_check_result": {"server_info": {}}})
    result = register_with_platform("127.0.0.1", 9000, "agent", PlatformCredentials("t"), api_key="k")
    assert (result.success, result.server_id, result.is_healthy) == (True, "srv-9", True)
    assert platform.calls[0]["json"]["api_key"] == "k"


async def test_unreachable_platform_is_a_failed_result(monkeypatch):
    sock = bind_listener()
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", f"http://127.0.0.1:{sock.getsockname()[1]}")
    sock.close()
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", PlatformCredentials("t"))
    assert not result.success
    assert "cannot reach the Platform" in (result.error or "")


def test_credentials_come_from_the_environment(monkeypatch):
    monkeypatch.delenv("OSMOSIS_ACCESS_TOKEN", raising=False)
    assert load_credentials() is None
    monkeypatch.setenv("OSMOSIS_ACCESS_TOKEN", "tok-123")
    credentials = load_credentials()
    assert credentials.access_token == "tok-123"
    assert "tok-123" not in repr(credentials)


async def test_wildcard_binds_report_osmosis_public_host(platform, monkeypatch):
    monkeypatch.setenv("OSMOSIS_PUBLIC_HOST", "rollouts.example.com")
    platform.reply = (200, {"id": "s", "status": "healthy", "health_check_result": {"server_info": {}}})
    result = await aregister_with_platform("0.0.0.0", 9000, "agent", PlatformCredentials("t"))
    assert result.success
    assert platform.calls[0]["json"]["host"] == "rollouts.example.com"


async def test_credentials_without_a_token_fail_cleanly(platform):
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", object())
    assert not result.success
    assert "no access token" in (result.error or "")
    assert platform.calls == []


@pytest.mark.parametrize(
    ("bind", "probe"),
    [
        ("0.0.0.0", "127.0.0.1"),
        ("", "127.0.0.1"),
        (" 0.0.0.0 ", "127.0.0.1"),  # is_wildcard_host strips; the readiness probe used not to
        ("::", "[::1]"),
        ("[::]", "[::1]"),
        ("localhost", "127.0.0.1"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "[::1]"),
        ("[::1]", "[::1]"),
        ("10.1.2.3", "10.1.2.3"),
    ],
)
def test_the_readiness_probe_uses_the_one_wildcard_definition(bind: str, probe: str):
    from osmosis_ai.rollout.server.registration import _probe_host

    assert _probe_host(bind) == probe


def test_without_a_callback_the_outcome_is_logged(caplog):
    from osmosis_ai.rollout.server.registration import log_registration_result

    with caplog.at_level("INFO", logger="osmosis_ai.rollout.server.registration"):
        log_registration_result(RegistrationResult(True, "srv-2", "healthy"))
        log_registration_result(RegistrationResult(False, status="error", error="the Platform is down"))
    assert "server id srv-2, healthy" in caplog.text
    assert "registration with the Osmosis Platform failed: the Platform is down" in caplog.text
