"""A stand-in Osmosis Platform on loopback: token verification and revocation, device login, the
browser login page, and rollout-server registration. Point the CLI at it with ``OSMOSIS_PLATFORM_URL``.

    platform = StandInPlatform().start()
    token = platform.issue_token(org_id="org-1", org_name="Acme")
    ...
    platform.stop()

Every request is recorded (method, path, ``Authorization`` header) in ``platform.requests``.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.cli import Ran, cli, osmosis
from tests.support.threaded_server import ThreadedServer


@dataclass
class IssuedToken:
    org_id: str
    org_name: str
    email: str
    expires_at: datetime
    token_id: str
    role: str = "admin"
    revoked: bool = False


@dataclass
class RecordedRequest:
    method: str
    path: str
    authorization: str | None
    body: Any = None


@dataclass
class DeviceSession:
    device_name: str
    answers: list[str]
    org_id: str
    org_name: str
    token_key: str = "token"
    polls: int = 0


@dataclass
class StandInPlatform:
    """See the module docstring. ``device_script`` is what the next device login's polls answer
    (``authorization_pending``, ``slow_down``, ``expired_token``, ``access_denied``) before approval;
    ``cli_auth`` is what the browser login page does: ``"approve"`` or an error code."""

    device_script: list[str] = field(default_factory=list)
    # The client reads an interval of 0 as "none given" and waits RFC 8628's default of 5 s between polls.
    device_interval: float = 0.01
    device_token_key: str = "token"
    device_org: tuple[str, str] = ("org-1", "Acme")
    device_org_by_name: dict[str, tuple[str, str]] = field(default_factory=dict)
    cli_auth: str = "approve"
    login_org: tuple[str, str] = ("org-1", "Acme")
    verify_expires_at: str | None = None
    tokens: dict[str, IssuedToken] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    devices: dict[str, DeviceSession] = field(default_factory=dict)
    registrations: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadedServer | None = None

    # -- control --

    def start(self) -> StandInPlatform:
        app = Starlette(
            routes=[
                Route("/api/cli/verify", self._verify, methods=["GET"]),
                Route("/api/cli/revoke", self._revoke, methods=["POST"]),
                Route("/api/cli/device/authorize", self._device_authorize, methods=["POST"]),
                Route("/api/cli/device/token", self._device_token, methods=["POST"]),
                Route("/api/cli/rollout-server/register", self._register, methods=["POST"]),
                Route("/api/cli/echo", self._echo, methods=["GET", "POST"]),
                Route("/cli-auth", self._cli_auth, methods=["GET"]),
            ]
        )
        self._server = ThreadedServer(app, name="stand-in-platform", lifespan="off").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        return self._server.url

    def issue_token(
        self,
        *,
        org_id: str = "org-1",
        org_name: str = "Acme",
        email: str = "ada@example.com",
        expires_in: timedelta = timedelta(days=30),
    ) -> str:
        token = "osm_test_" + secrets.token_urlsafe(24)
        with self._lock:
            self.tokens[token] = IssuedToken(
                org_id,
                org_name,
                email,
                datetime.now(timezone.utc) + expires_in,
                "tid-" + secrets.token_hex(4),
            )
        return token

    def revoke(self, token: str) -> None:
        self.tokens[token].revoked = True

    def authorizations(self, path: str) -> list[str | None]:
        """The ``Authorization`` headers of the requests to ``path``, in order."""
        return [r.authorization for r in self.requests if r.path == path]

    # -- handlers --

    async def _record(self, request: Request) -> Any:
        raw = await request.body()
        body: Any = None
        if raw:
            try:
                body = await request.json()
            except ValueError:
                body = raw.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(
                RecordedRequest(request.method, request.url.path, request.headers.get("authorization"), body)
            )
        return body

    def _authenticated(self, request: Request) -> tuple[str, IssuedToken] | None:
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer "):
            return None
        token = header[len("Bearer ") :]
        issued = self.tokens.get(token)
        if issued is None or issued.revoked or issued.expires_at <= datetime.now(timezone.utc):
            return None
        return token, issued

    @staticmethod
    def _unauthorized() -> Response:
        return JSONResponse({"error": "unauthorized"}, status_code=401)

    def _identity(self, issued: IssuedToken) -> dict[str, Any]:
        return {
            "user": {"id": "user-" + issued.email, "email": issued.email, "name": "Ada"},
            "organization": {"id": issued.org_id, "name": issued.org_name, "role": issued.role},
            "expires_at": self.verify_expires_at or issued.expires_at.isoformat().replace("+00:00", "Z"),
            "token_id": issued.token_id,
        }

    async def _verify(self, request: Request) -> Response:
        await self._record(request)
        found = self._authenticated(request)
        if found is None:
            return self._unauthorized()
        return JSONResponse({"valid": True, **self._identity(found[1])})

    async def _revoke(self, request: Request) -> Response:
        await self._record(request)
        found = self._authenticated(request)
        if found is None:
            return self._unauthorized()
        found[1].revoked = True
        return JSONResponse({"revoked": True})

    async def _echo(self, request: Request) -> Response:
        await self._record(request)
        found = self._authenticated(request)
        if found is None:
            return self._unauthorized()
        if request.query_params.get("fail"):  # a careless server error that echoes the request
            return PlainTextResponse(f"boom: {request.headers['authorization']}", status_code=500)
        return JSONResponse({"ok": True, "org": found[1].org_id})

    async def _register(self, request: Request) -> Response:
        body = await self._record(request)
        if self._authenticated(request) is None:
            return self._unauthorized()
        self.registrations.append(body)
        return JSONResponse({"id": "srv-1", "status": "healthy", "health_check_result": {"server_info": {}}})

    async def _device_authorize(self, request: Request) -> Response:
        body = await self._record(request)
        device_code = "dc_" + secrets.token_urlsafe(16)
        user_code = secrets.token_hex(2).upper() + "-" + secrets.token_hex(2).upper()
        name = str((body or {}).get("deviceName"))
        org = self.device_org_by_name.get(name, self.device_org)
        with self._lock:
            self.devices[device_code] = DeviceSession(
                name, list(self.device_script), *org,
                token_key=self.device_token_key,
            )  # fmt: skip
        return JSONResponse({
            "device_code": device_code,
            "user_code": user_code,
            "verification_uri": f"{self.url}/device",
            "verification_uri_complete": f"{self.url}/device?code={user_code}",
            "expires_in": 600,
            "interval": self.device_interval,
        })  # fmt: skip

    async def _device_token(self, request: Request) -> Response:
        body = await self._record(request)
        session = self.devices.get(str((body or {}).get("device_code")))
        if session is None:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        session.polls += 1
        if session.answers:
            return JSONResponse({"error": session.answers.pop(0)}, status_code=400)
        token = self.issue_token(org_id=session.org_id, org_name=session.org_name)
        return JSONResponse(
            {session.token_key: token, "revoked_count": 1, **self._identity(self.tokens[token])}
        )

    async def _cli_auth(self, request: Request) -> Response:
        await self._record(request)
        params = request.query_params
        redirect = params["redirect_uri"]
        if self.cli_auth == "approve":
            token = self.issue_token(org_id=self.login_org[0], org_name=self.login_org[1])
            query = {"token": token, "state": params["state"], "revoked_count": "0"}
        else:
            query = {
                "error": self.cli_auth,
                "error_description": "the user denied access",
                "state": params["state"],
            }
        return RedirectResponse(f"{redirect}?{urlencode(query)}", status_code=302)


def osmosis_on(
    platform: StandInPlatform,
    config_dir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    process: bool = False,
    **kwargs: Any,
) -> Ran:
    """``osmosis *args`` pointed at ``platform`` with its credentials in ``config_dir``, through the
    command line's ``main()`` in this process (with ``process``, as a subprocess).

    Fails the test if any token the stand-in ever issued appears in the command's output.
    """
    run = osmosis if process else cli
    result = run(
        *args, env={"OSMOSIS_PLATFORM_URL": platform.url, "OSMOSIS_CONFIG_DIR": str(config_dir), **(env or {})},
        **kwargs,
    )  # fmt: skip
    assert_no_token(platform, result.stdout + result.stderr)
    return result


def assert_no_token(platform: StandInPlatform, text: str) -> None:
    leaked = [token for token in list(platform.tokens) if token in text]
    assert not leaked, "a Platform token appears in the output"
