"""The Platform client: every call to the Osmosis Platform's CLI API, through the SDK's one HTTP
seam (:mod:`osmosis_ai._http`). Each call exists async (for code on an event loop: the rollout
server's registration) and as a blocking form over it (the commands).

* :func:`acall` / :func:`call` — one JSON request to a Platform with an optional bearer token; HTTP
  errors become :class:`PlatformAPIError` (401: :class:`AuthenticationExpiredError`), no answer becomes
  ``PlatformAPIError`` with ``status_code=None``. They never touch the store.
* :func:`resolve_credentials` — what a command uses: ``OSMOSIS_TOKEN``/``OSMOSIS_ACCESS_TOKEN`` first,
  else the current Platform's active workspace if it is usable.
* :func:`aauthenticated_request` / :func:`authenticated_request` — a call with credentials: refuses
  to send a stored login's token to a Platform other than the one that issued it, and on a 401 flags
  exactly those credentials as invalid (other workspaces, and the file on a network error, are left
  alone). Any other object with an ``access_token`` is a bare token, sent to the configured Platform.
* :func:`verify_token` and :func:`revoke` — the two token endpoints.

Tokens never appear in messages: an error body is shown through :func:`osmosis_ai._http.redact`,
which masks the token sent, any 6-character piece of it and anything else that looks like a credential.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from osmosis_ai import _http
from osmosis_ai._sync import synchronous
from osmosis_ai.auth import settings, store
from osmosis_ai.auth.errors import AuthenticationExpiredError, LoginError, PlatformAPIError
from osmosis_ai.auth.store import OrganizationInfo, UserInfo, WorkspaceCredentials, parse_timestamp
from osmosis_ai.consts import PACKAGE_VERSION

VERIFY_PATH = "/api/cli/verify"
REVOKE_PATH = "/api/cli/revoke"
USER_AGENT = f"osmosis-cli/{PACKAGE_VERSION}"
ERROR_BODY_LIMIT = 500
LOGIN_HINT = "run 'osmosis login' (or 'osmosis login --device' on a machine without a browser)"


async def acall(
    endpoint: str,
    *,
    method: str = "GET",
    data: Any = None,
    token: str | None = None,
    base_url: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Any:
    """Send one request to ``base_url + endpoint`` and return the parsed JSON answer."""
    url = (base_url or settings.platform_url()) + endpoint
    request_headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    if token:
        request_headers["Authorization"] = f"Bearer {token}"
    request_headers.update(headers or {})
    body = json.dumps(data).encode("utf-8") if data is not None else None
    try:
        response = await _http.shared_pool().request(
            method, url, body=body, headers=request_headers, timeout=timeout
        )
    except _http.NoAnswer as exc:
        raise PlatformAPIError(f"cannot reach the Platform at {url}: {exc}") from None
    text = response.body.decode("utf-8", "replace")
    if response.status == 401:
        raise AuthenticationExpiredError(
            f"the Osmosis Platform rejected the credentials (expired or revoked); {LOGIN_HINT}"
        )
    if not 200 <= response.status < 300:
        shown = _http.redact(text, token)  # the token, any piece of it, anything else credential-like
        shown = shown if len(shown) <= ERROR_BODY_LIMIT else shown[:ERROR_BODY_LIMIT] + "...(truncated)"
        detail = f" Response: {shown}" if shown else ""
        raise PlatformAPIError(f"API error: HTTP {response.status} from {url}.{detail}", response.status)
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        raise PlatformAPIError(f"the Osmosis Platform answered {url} with a body that is not JSON") from None


call = synchronous(
    acall, "call", ":func:`acall`, blocking (callable from any thread, one running an event loop included)."
)


@dataclass(frozen=True)
class EnvCredentials:
    """A token from ``OSMOSIS_TOKEN``/``OSMOSIS_ACCESS_TOKEN``: sent to whichever Platform is configured."""

    access_token: str

    def __repr__(self) -> str:
        return "EnvCredentials(access_token='***')"


def resolve_credentials() -> WorkspaceCredentials | EnvCredentials | None:
    """The environment's token, else the current Platform's active workspace if usable, else ``None``."""
    token = settings.env_token()
    if token:
        return EnvCredentials(token)
    active = store.current_store().get_active_credentials()
    return active if active is not None and active.is_usable() else None


def _not_logged_in() -> AuthenticationExpiredError:
    active = store.current_store().get_active_credentials()
    if active is not None and active.token_problem:
        return AuthenticationExpiredError(active.token_problem)
    return AuthenticationExpiredError(f"not logged in to the Osmosis Platform; {LOGIN_HINT}")


async def aauthenticated_request(
    endpoint: str,
    *,
    credentials: Any = None,
    method: str = "GET",
    data: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Any:
    """:func:`acall` with ``credentials`` (default: :func:`resolve_credentials`); the store is read
    and written in a worker thread, never on the event loop."""
    if credentials is None:
        credentials = await asyncio.to_thread(resolve_credentials)
        if credentials is None:
            raise await asyncio.to_thread(_not_logged_in)
    if isinstance(credentials, WorkspaceCredentials) and credentials.token_problem:
        raise AuthenticationExpiredError(credentials.token_problem)
    token = getattr(credentials, "access_token", None)
    if not isinstance(token, str) or not token:
        raise AuthenticationExpiredError(f"the Platform credentials carry no access token; {LOGIN_HINT}")
    base_url = settings.platform_url()
    if isinstance(credentials, WorkspaceCredentials):
        issued_by = credentials.platform_url
        if issued_by is not None and issued_by != base_url:
            raise AuthenticationExpiredError(
                f"these credentials were issued by {issued_by}, not by {base_url}; "
                "they are never sent to another Platform"
            )
    try:
        return await acall(
            endpoint,
            method=method,
            data=data,
            token=token,
            base_url=base_url,
            headers=headers,
            timeout=timeout,
        )
    except AuthenticationExpiredError:
        if isinstance(credentials, WorkspaceCredentials):
            await asyncio.to_thread(store.mark_invalid, credentials)
            raise AuthenticationExpiredError(
                f"the Osmosis Platform no longer accepts the credentials of workspace "
                f"{credentials.workspace_name!r} (expired or revoked); {LOGIN_HINT}"
            ) from None
        raise AuthenticationExpiredError(
            f"the Osmosis Platform rejected the token (expired or revoked); if it comes from "
            f"{'/'.join(settings.TOKEN_ENVS)}, set a valid one there, or unset it and {LOGIN_HINT}"
        ) from None


authenticated_request = synchronous(
    aauthenticated_request,
    "authenticated_request",
    ":func:`aauthenticated_request`, blocking (callable from any thread).",
)


# -- the token endpoints -----------------------------------------------------------------------------


def _user(data: Any) -> UserInfo:
    return UserInfo.from_dict(data if isinstance(data, dict) else {})


def _organization(data: Any) -> OrganizationInfo:
    return OrganizationInfo.from_dict(data if isinstance(data, dict) else {})


def credentials_from_reply(token: str, reply: dict[str, Any], platform_url: str) -> WorkspaceCredentials:
    """Credentials for ``token`` described by a verify (or device-token) reply.

    Raises :class:`LoginError` for an ``expires_at`` that is not an ISO-8601 time with an offset; an
    absent one means the default lifetime.
    """
    raw_expiry = reply.get("expires_at")
    now = datetime.now(timezone.utc)
    if raw_expiry:
        try:
            expires_at = parse_timestamp(str(raw_expiry))
        except ValueError:
            raise LoginError(
                "the Platform sent an expiry time without a UTC offset or not ISO-8601"
            ) from None
    else:
        expires_at = now + timedelta(days=settings.DEFAULT_TOKEN_EXPIRY_DAYS)
    token_id = reply.get("token_id")
    return WorkspaceCredentials(
        access_token=token,
        token_type="Bearer",
        expires_at=expires_at,
        user=_user(reply.get("user")),
        organization=_organization(reply.get("organization")),
        created_at=now,
        token_id=str(token_id) if token_id else None,
        platform_url=platform_url,
    )


def verify_token(token: str, *, base_url: str | None = None, timeout: float = 30.0) -> WorkspaceCredentials:
    """Ask the Platform who ``token`` belongs to; the answer as (unsaved) credentials.

    Raises :class:`LoginError` when the token is not valid or the Platform cannot tell.
    """
    url = base_url or settings.platform_url()
    try:
        reply = call(VERIFY_PATH, token=token, base_url=url, timeout=timeout)
    except AuthenticationExpiredError:
        raise LoginError("token verification failed: the token is invalid, expired or revoked") from None
    except PlatformAPIError as exc:
        raise LoginError(f"token verification failed: {exc}") from None
    if not isinstance(reply, dict) or not reply.get("valid"):
        raise LoginError("token verification failed: the Platform did not confirm the token")
    credentials = credentials_from_reply(token, reply, url)
    if credentials.is_expired():
        raise LoginError("token verification failed: the token has already expired")
    return credentials


@dataclass(frozen=True)
class RevokeOutcome:
    """Whether the Platform now refuses the token, and if not, why (for the user)."""

    revoked: bool
    reason: str = ""


def revoke(credentials: WorkspaceCredentials, *, timeout: float = 15.0) -> RevokeOutcome:
    """Ask the Platform that issued ``credentials`` to revoke them. Never raises for Platform failures."""
    if not credentials.access_token:
        return RevokeOutcome(False, "the token could not be read from the OS keyring")
    base_url = credentials.platform_url or settings.platform_url()
    data = {"token_id": credentials.token_id} if credentials.token_id else {}
    try:
        call(
            REVOKE_PATH,
            method="POST",
            data=data,
            token=credentials.access_token,
            base_url=base_url,
            timeout=timeout,
        )
    except AuthenticationExpiredError:
        return RevokeOutcome(True, "the Platform already refused this token")
    except PlatformAPIError as exc:
        if exc.status_code is None:
            return RevokeOutcome(False, "the Platform could not be reached")
        return RevokeOutcome(False, f"the Platform answered HTTP {exc.status_code}")
    return RevokeOutcome(True)
