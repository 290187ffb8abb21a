"""Device-code login (RFC 8628) for machines without a browser, such as a GPU box reached over SSH.

1. ``POST /api/cli/device/authorize`` with ``deviceName``: the Platform answers a ``device_code`` (kept
   here), a ``user_code`` and the ``verification_uri`` (+ ``_complete``) the user opens anywhere.
2. ``POST /api/cli/device/token`` with the ``device_code`` every ``interval`` seconds. HTTP 400 with
   ``{"error": ...}`` means: ``authorization_pending`` (ask again), ``slow_down`` (ask again, 5 s
   later than before, for the rest of the flow), ``expired_token`` or ``access_denied`` (stop).
3. The success reply carries the token (``token``, or RFC 8628's ``access_token``); like a browser
   login, it is verified with ``/api/cli/verify`` before it is stored.

The library does not print: the caller shows the code through ``on_code``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from osmosis_ai import _http
from osmosis_ai._sync import run_sync
from osmosis_ai.auth import settings
from osmosis_ai.auth.client import USER_AGENT, call
from osmosis_ai.auth.errors import LoginError, PlatformAPIError
from osmosis_ai.auth.session import LoginResult, complete_login

AUTHORIZE_PATH = "/api/cli/device/authorize"
TOKEN_PATH = "/api/cli/device/token"
SLOW_DOWN_SECONDS = 5.0
DEFAULT_INTERVAL_SECONDS = 5.0


@dataclass(frozen=True)
class DeviceAuthorization:
    """What the user needs to approve this device. ``device_code`` is secret: it is never shown."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float

    def __repr__(self) -> str:
        return (
            f"DeviceAuthorization(user_code={self.user_code!r}, verification_uri={self.verification_uri!r})"
        )


def request_authorization(device_name: str, *, base_url: str | None = None) -> DeviceAuthorization:
    """Step 1. Raises :class:`LoginError` when the Platform does not offer device login."""
    try:
        reply = call(AUTHORIZE_PATH, method="POST", data={"deviceName": device_name}, base_url=base_url)
    except PlatformAPIError as exc:
        raise LoginError(f"the Platform did not start a device login: {exc}") from None
    try:
        return DeviceAuthorization(
            device_code=str(reply["device_code"]),
            user_code=str(reply["user_code"]),
            verification_uri=str(reply["verification_uri"]),
            verification_uri_complete=(
                str(reply["verification_uri_complete"]) if reply.get("verification_uri_complete") else None
            ),
            expires_in=float(reply.get("expires_in") or 600),
            interval=float(reply.get("interval") or DEFAULT_INTERVAL_SECONDS),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        raise LoginError("the Platform's device authorization reply is missing fields") from None


def _ask_for_token(device_code: str, base_url: str) -> tuple[int, Any]:
    url = base_url + TOKEN_PATH
    body = json.dumps({"device_code": device_code}).encode("utf-8")
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}

    async def send() -> _http.Response:
        return await _http.shared_pool().request("POST", url, body=body, headers=headers, timeout=30.0)

    response = run_sync(send())
    try:
        return response.status, json.loads(response.body.decode("utf-8", "replace") or "{}")
    except ValueError:
        return response.status, None


def poll_for_token(
    authorization: DeviceAuthorization,
    *,
    base_url: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Step 2: poll until the user approves; the success reply, with the token under ``token``."""
    url = base_url or settings.platform_url()
    interval = max(authorization.interval, 0.0)
    deadline = clock() + authorization.expires_in
    while True:
        sleep(interval)
        if clock() > deadline:
            raise LoginError("the device code expired before it was approved; run the login again")
        try:
            status, reply = _ask_for_token(authorization.device_code, url)
        except _http.NoAnswer:
            continue  # a network hiccup: the code is still valid, ask again at the next interval
        if 200 <= status < 300 and isinstance(reply, dict):
            token = reply.get("token") or reply.get("access_token")
            if not token:
                raise LoginError("the Platform approved the device but sent no token")
            return {**reply, "token": str(token)}
        error = reply.get("error") if isinstance(reply, dict) else None
        if status == 400 and error == "authorization_pending":
            continue
        if status == 400 and error == "slow_down":
            interval += SLOW_DOWN_SECONDS
            continue
        if error == "expired_token":
            raise LoginError("the device code expired before it was approved; run the login again")
        if error == "access_denied":
            raise LoginError("the login was denied in the browser")
        if status == 429 or status >= 500:
            continue
        raise LoginError(
            f"device login failed: the Platform answered HTTP {status}" + (f" ({error})" if error else "")
        )


def device_login(
    *,
    device_name: str | None = None,
    on_code: Callable[[DeviceAuthorization], object] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> LoginResult:
    """Run the whole device flow against the current Platform, store the verified token, return who."""
    base_url = settings.platform_url()
    authorization = request_authorization(device_name or settings.device_name(), base_url=base_url)
    if on_code is not None:
        on_code(authorization)
    reply = poll_for_token(authorization, base_url=base_url, sleep=sleep)
    return complete_login(
        reply["token"], base_url=base_url, revoked_count=int(reply.get("revoked_count") or 0)
    )
