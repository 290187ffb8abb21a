"""Platform registration, through the one Platform client, against stand-in Platforms on loopback
(``OSMOSIS_PLATFORM_URL`` points at them)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from osmosis_ai.auth.client import EnvCredentials, verify_token
from osmosis_ai.auth.store import CredentialsFile, OrganizationInfo, UserInfo, WorkspaceCredentials, save
from osmosis_ai.rollout.server.app import create_app
from osmosis_ai.rollout.server.registration import (
    REGISTER_PATH,
    RegistrationResult,
    aregister_with_platform,
    load_credentials,
    register_with_platform,
)
from tests.support.platform import StandInPlatform
from tests.support.server import (
    PlatformStandIn,
    RunningServer,
    ScriptedAgent,
    fast_config,
)
from tests.support.sockets import free_port, listener

KEY = "osm_rollout_registration-key"


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[PlatformStandIn]:
    stand_in = PlatformStandIn()
    stand_in.server.start()
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", stand_in.server.url + "/")
    yield stand_in
    stand_in.server.stop()


def _serve_and_register(bind_host: str) -> tuple[int, RegistrationResult]:
    """Serve on 127.0.0.1 while telling the app it is bound to ``bind_host``; the registration outcome."""
    return _serve_and_register_with(EnvCredentials("platform-token"), bind_host)


def _serve_and_register_with(
    credentials: object, bind_host: str = "127.0.0.1"
) -> tuple[int, RegistrationResult]:
    sock = listener()
    port = sock.getsockname()[1]
    results: list[RegistrationResult] = []
    registered = threading.Event()

    def on_registration(result: RegistrationResult) -> None:
        results.append(result)
        registered.set()

    config = fast_config(
        api_key=KEY,
        credentials=credentials,
        host=bind_host,
        port=port,
        on_registration=on_registration,
    )
    app = create_app(ScriptedAgent(), config=config)
    server = RunningServer(app, sock).start()
    try:
        assert registered.wait(30)
    finally:
        server.stop()
    (result,) = results
    return port, result


def test_server_registers_once_ready_and_hands_the_result_over(platform, capsys):
    port, result = _serve_and_register("127.0.0.1")
    assert len(platform.calls) == 1
    call = platform.calls[0]
    assert call["json"] == {"host": "127.0.0.1", "port": port, "agent_loop_name": "scripted", "api_key": KEY}
    assert call["headers"]["authorization"] == "Bearer platform-token"
    assert call["headers"]["user-agent"].startswith("osmosis-cli/")
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
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", EnvCredentials("t"), api_key=None)
    assert (result.success, result.status) == (success, status)
    assert error_part in (result.error or "")
    assert "api_key" not in platform.calls[0]["json"]  # omitted when the server has no key


def test_the_synchronous_form_registers_too(platform):
    platform.reply = (200, {"id": "srv-9", "status": "healthy", "health_check_result": {"server_info": {}}})
    result = register_with_platform("127.0.0.1", 9000, "agent", EnvCredentials("t"), api_key="k")
    assert (result.success, result.server_id, result.is_healthy) == (True, "srv-9", True)
    assert platform.calls[0]["json"]["api_key"] == "k"


async def test_unreachable_platform_is_a_failed_result(monkeypatch):
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", f"http://127.0.0.1:{free_port()}")
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", EnvCredentials("t"))
    assert not result.success
    assert "cannot reach the Platform" in (result.error or "")


def _stored_login(platform_url: str, token: str = "tok-stored") -> WorkspaceCredentials:
    now = datetime.now(timezone.utc)
    return save(
        WorkspaceCredentials(
            token, "Bearer", now + timedelta(days=1), UserInfo("u", "u@example.com"),
            OrganizationInfo("org-1", "Acme"), now, platform_url=platform_url,
        )
    )  # fmt: skip


def test_credentials_come_from_the_environment_then_the_login(monkeypatch, tmp_path):
    monkeypatch.setenv("OSMOSIS_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", "https://platform.example.com")
    monkeypatch.delenv("OSMOSIS_ACCESS_TOKEN", raising=False)
    monkeypatch.delenv("OSMOSIS_TOKEN", raising=False)
    assert load_credentials() is None
    _stored_login("https://platform.example.com")
    assert load_credentials().access_token == "tok-stored"
    monkeypatch.setenv("OSMOSIS_ACCESS_TOKEN", "tok-123")
    credentials = load_credentials()
    assert credentials.access_token == "tok-123"
    assert "tok-123" not in repr(credentials)


async def test_a_rejected_login_is_flagged(platform, monkeypatch, tmp_path):
    monkeypatch.setenv("OSMOSIS_CONFIG_DIR", str(tmp_path))
    stored = _stored_login(platform.server.url)
    platform.reply = (401, {"error": "unauthorized"})
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", stored)
    assert not result.success and "osmosis login" in (result.error or "")
    (flagged,) = CredentialsFile().read(platform.server.url).workspaces.values()
    assert flagged.invalid


async def test_a_login_is_not_sent_to_another_platform(platform, monkeypatch, tmp_path):
    monkeypatch.setenv("OSMOSIS_CONFIG_DIR", str(tmp_path))
    stored = _stored_login("https://platform.example.com")
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", stored)
    assert not result.success and "issued by https://platform.example.com" in (result.error or "")
    assert platform.calls == []


async def test_wildcard_binds_report_osmosis_public_host(platform, monkeypatch):
    monkeypatch.setenv("OSMOSIS_PUBLIC_HOST", "rollouts.example.com")
    platform.reply = (200, {"id": "s", "status": "healthy", "health_check_result": {"server_info": {}}})
    result = await aregister_with_platform("0.0.0.0", 9000, "agent", EnvCredentials("t"))
    assert result.success
    assert platform.calls[0]["json"]["host"] == "rollouts.example.com"


async def test_credentials_without_a_token_fail_cleanly(platform):
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", object())
    assert not result.success
    assert "no access token" in (result.error or "")
    assert platform.calls == []


@pytest.mark.parametrize("bind", ["0.0.0.0", " 0.0.0.0 ", "", "localhost", "127.0.0.1"])
def test_the_readiness_probe_finds_a_server_bound_to_a_wildcard_or_loopback_host(
    platform, monkeypatch: pytest.MonkeyPatch, bind: str
):
    monkeypatch.setenv("OSMOSIS_PUBLIC_HOST", "203.0.113.9")  # what a wildcard bind reports
    platform.reply = (200, {"id": "srv-3", "status": "healthy"})  # no health check back at 203.0.113.9
    port, result = _serve_and_register(bind)
    assert result.success, result.error  # registration waits for /health to answer first
    (call,) = platform.calls
    assert (call["json"]["port"], result.server_id) == (port, "srv-3")


def test_without_a_callback_the_outcome_is_logged(caplog):
    from osmosis_ai.rollout.server.registration import log_registration_result

    with caplog.at_level("INFO", logger="osmosis_ai.rollout.server.registration"):
        log_registration_result(RegistrationResult(True, "srv-2", "healthy"))
        log_registration_result(RegistrationResult(False, status="error", error="the Platform is down"))
    assert "server id srv-2, healthy" in caplog.text
    assert "registration with the Osmosis Platform failed: the Platform is down" in caplog.text


def test_a_stored_login_registers_a_served_app_and_a_revoked_one_is_flagged(monkeypatch, tmp_path):
    platform = StandInPlatform().start()
    try:
        monkeypatch.setenv("OSMOSIS_CONFIG_DIR", str(tmp_path))
        monkeypatch.setenv("OSMOSIS_PLATFORM_URL", platform.url)
        for name in ("OSMOSIS_TOKEN", "OSMOSIS_ACCESS_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OSMOSIS_KEYRING", "0")
        token = platform.issue_token()
        save(verify_token(token))
        stored = load_credentials()
        _, result = _serve_and_register_with(stored)
        assert (result.success, result.server_id) == (True, "srv-1")
        assert platform.authorizations(REGISTER_PATH) == [f"Bearer {token}"]
        (registered,) = platform.registrations
        assert registered["agent_loop_name"] == "scripted" and registered["api_key"] == KEY
        platform.revoke(token)
        rejected = register_with_platform("127.0.0.1", 9000, "agent", stored, api_key=KEY)
        assert (
            not rejected.success
            and "'Acme'" in (rejected.error or "")
            and "osmosis login" in (rejected.error or "")
        )
        assert load_credentials() is None  # flagged in the store: the next command asks for a login
        assert token not in repr(rejected)
    finally:
        platform.stop()


async def test_an_error_body_echoing_the_token_is_redacted(platform):
    platform.reply = (500, b"boom: Bearer tok-echoed")
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", EnvCredentials("tok-echoed"))
    assert not result.success and "HTTP 500" in (result.error or "")
    assert "tok-echoed" not in (result.error or "") and "[redacted]" in (result.error or "")


async def test_a_token_is_never_sent_over_plain_http_beyond_loopback(monkeypatch):
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", f"http://platform.example.com:{free_port()}")
    result = await aregister_with_platform("127.0.0.1", 9000, "agent", EnvCredentials("t"))
    assert not result.success and "only over https" in (result.error or "")


async def test_the_synchronous_form_works_from_a_thread_running_an_event_loop(platform):
    platform.reply = (200, {"id": "srv-4", "status": "healthy", "health_check_result": {}})
    result = register_with_platform("127.0.0.1", 9000, "agent", EnvCredentials("t"))  # blocks this loop
    assert (result.success, result.server_id) == (True, "srv-4")
