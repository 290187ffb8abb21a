from __future__ import annotations

from datetime import timedelta

import pytest
from osmosis_ai.auth.platform_client import platform_request

from osmosis_ai.auth import credentials as api
from osmosis_ai.auth.client import EnvCredentials, aauthenticated_request, revoke, verify_token
from osmosis_ai.auth.errors import AuthenticationExpiredError, LoginError, PlatformAPIError
from tests.support.platform import StandInPlatform
from tests.support.sockets import free_port


def login_as(platform: StandInPlatform, org_id: str = "org-1", name: str = "Acme") -> str:
    token = platform.issue_token(org_id=org_id, org_name=name)
    api.save_credentials(verify_token(token, base_url=platform.url))
    return token


def test_requests_carry_the_active_workspaces_token(on_platform: StandInPlatform):
    token = login_as(on_platform)
    assert platform_request("/api/cli/echo") == {"ok": True, "org": "org-1"}
    assert on_platform.authorizations("/api/cli/echo") == [f"Bearer {token}"]


async def test_the_blocking_form_works_inside_a_running_event_loop(on_platform: StandInPlatform):
    token = login_as(on_platform)
    assert platform_request("/api/cli/echo") == {"ok": True, "org": "org-1"}
    assert on_platform.authorizations("/api/cli/echo") == [f"Bearer {token}"]


def test_the_environment_token_comes_first(on_platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch):
    login_as(on_platform)
    ci_token = on_platform.issue_token(org_id="org-ci", org_name="CI")
    monkeypatch.setenv("OSMOSIS_TOKEN", ci_token)
    assert platform_request("/api/cli/echo")["org"] == "org-ci"


def test_a_401_flags_only_the_credentials_used(on_platform: StandInPlatform):
    first = login_as(on_platform, "org-1", "Acme")
    login_as(on_platform, "org-2", "Beta")  # now the active one
    on_platform.revoke(first)
    acme = next(c for _, c, _ in api.get_all_workspaces() if c.organization.id == "org-1")
    with pytest.raises(AuthenticationExpiredError, match=r"'Acme'.*osmosis login") as caught:
        platform_request("/api/cli/echo", credentials=acme)
    assert first not in str(caught.value)
    flags = {c.organization.id: c.invalid for _, c, _ in api.get_all_workspaces()}
    assert flags == {"org-1": True, "org-2": False}
    assert platform_request("/api/cli/echo")["org"] == "org-2"


def test_a_network_error_keeps_the_credentials(on_platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch):
    login_as(on_platform)
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", on_platform.url)
    on_platform.stop()
    with pytest.raises(PlatformAPIError, match="cannot reach") as caught:
        platform_request("/api/cli/echo")
    assert caught.value.status_code is None
    assert api.get_valid_credentials() is not None


def test_a_token_for_platform_a_is_never_sent_to_platform_b(
    on_platform: StandInPlatform, monkeypatch: pytest.MonkeyPatch
):
    login_as(on_platform)
    stored = api.load_credentials()
    other = StandInPlatform().start()
    try:
        monkeypatch.setenv("OSMOSIS_PLATFORM_URL", other.url)
        with pytest.raises(AuthenticationExpiredError, match="not logged in"):
            platform_request("/api/cli/echo")
        with pytest.raises(AuthenticationExpiredError, match="issued by"):
            platform_request("/api/cli/echo", credentials=stored)
        assert other.requests == []
    finally:
        other.stop()


def test_not_logged_in_says_which_command_to_run(on_platform: StandInPlatform):
    with pytest.raises(AuthenticationExpiredError, match="osmosis login"):
        platform_request("/api/cli/echo")


def test_error_bodies_do_not_echo_the_token(on_platform: StandInPlatform):
    token = login_as(on_platform)
    with pytest.raises(PlatformAPIError) as caught:
        platform_request("/api/cli/echo?fail=1")
    assert caught.value.status_code == 500
    assert "boom" in str(caught.value)
    assert token not in str(caught.value)


def test_verification_rejects_expired_and_revoked_tokens(on_platform: StandInPlatform):
    revoked = on_platform.issue_token()
    on_platform.revoke(revoked)
    with pytest.raises(LoginError, match="invalid, expired or revoked"):
        verify_token(revoked)
    expired = on_platform.issue_token(expires_in=timedelta(seconds=-5))
    with pytest.raises(LoginError):
        verify_token(expired)
    on_platform.verify_expires_at = "2020-01-01T00:00:00"
    with pytest.raises(LoginError, match="UTC offset"):
        verify_token(on_platform.issue_token())


def test_revoke_reports_what_happened(on_platform: StandInPlatform):
    login_as(on_platform)
    stored = api.load_credentials()
    assert stored is not None
    assert revoke(stored).revoked
    assert on_platform.tokens[stored.access_token].revoked
    on_platform.stop()
    outcome = revoke(stored)
    assert not outcome.revoked and "could not be reached" in outcome.reason


def test_plain_http_platforms_are_refused(config_dir, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", f"http://example.com:{free_port()}")
    from osmosis_ai.auth.errors import PlatformURLError

    with pytest.raises(PlatformURLError):
        platform_request("/api/cli/echo", credentials=EnvCredentials("tok"))


async def test_the_async_form_flags_a_rejected_login_off_the_event_loop(on_platform: StandInPlatform):
    token = login_as(on_platform)
    assert (await aauthenticated_request("/api/cli/echo"))["org"] == "org-1"
    on_platform.revoke(token)
    with pytest.raises(AuthenticationExpiredError, match=r"'Acme'.*osmosis login"):
        await aauthenticated_request("/api/cli/echo")
    assert api.get_valid_credentials() is None


def test_only_messages_are_redacted_never_the_answer(on_platform: StandInPlatform):
    token = login_as(on_platform)
    on_platform.tokens[token].org_id = f"org-of-{token}"  # an answer that happens to contain the token
    assert platform_request("/api/cli/echo")["org"] == f"org-of-{token}"
