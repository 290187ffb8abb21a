"""The device flow against the stand-in Platform; ``sleep`` records the waits instead of waiting."""

from __future__ import annotations

import pytest

from osmosis_ai.auth import credentials as api
from osmosis_ai.auth.device import DeviceAuthorization, device_login
from osmosis_ai.auth.errors import LoginError
from tests.support.platform import StandInPlatform


class Waits(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_pending_then_slow_down_then_approved(on_platform: StandInPlatform):
    on_platform.device_interval = 2
    on_platform.device_script = ["authorization_pending", "slow_down", "authorization_pending"]
    shown: list[DeviceAuthorization] = []
    waits = Waits()
    result = device_login(device_name="gpu-box", on_code=shown.append, sleep=waits)
    assert waits == [2, 2, 7, 7]  # slow_down adds 5 s for the rest of the flow
    assert result.organization.id == "org-1" and result.revoked_previous_tokens == 1
    assert shown[0].user_code and shown[0].verification_uri.endswith("/device")
    assert "dc_" not in repr(shown[0])
    (session,) = on_platform.devices.values()
    assert session.device_name == "gpu-box"
    stored = api.get_valid_credentials()
    assert stored is not None and stored.access_token in on_platform.tokens
    assert on_platform.authorizations("/api/cli/verify") == [f"Bearer {stored.access_token}"]


def test_rfc_8628_access_token_is_accepted(on_platform: StandInPlatform):
    on_platform.device_token_key = "access_token"
    assert device_login(sleep=Waits()).user.email == "ada@example.com"


@pytest.mark.parametrize(
    ("answer", "message"),
    [("expired_token", "expired"), ("access_denied", "denied"), ("invalid_grant", "HTTP 400")],
)
def test_terminal_answers_end_the_flow(on_platform: StandInPlatform, answer: str, message: str):
    on_platform.device_script = ["authorization_pending", answer]
    with pytest.raises(LoginError, match=message):
        device_login(sleep=Waits())
    assert api.load_credentials() is None


def test_a_revoked_token_is_not_stored(on_platform: StandInPlatform):
    # The token the device flow hands out is checked with /api/cli/verify before it is stored.
    original = on_platform.issue_token

    def revoked_on_issue(**kwargs: object) -> str:
        token = original(**kwargs)  # type: ignore[arg-type]
        on_platform.revoke(token)
        return token

    on_platform.issue_token = revoked_on_issue  # type: ignore[method-assign]
    with pytest.raises(LoginError, match="invalid, expired or revoked"):
        device_login(sleep=Waits())
    assert api.load_credentials() is None
