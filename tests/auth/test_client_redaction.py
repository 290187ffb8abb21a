"""A Platform error body is shown with the token masked in every form it may echo (whole, a piece,
after a key word), and plain-http Platform URLs are accepted for the literal loopback only."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from osmosis_ai.auth import client, settings
from osmosis_ai.auth.errors import PlatformAPIError, PlatformURLError
from tests.support.threaded_server import ThreadedServer

TOKEN = "osm_live_4f9a2c7e1b8d6035aa91"


async def _echo(request: Request) -> PlainTextResponse:
    sent = request.headers["authorization"].removeprefix("Bearer ")
    body = (
        f"bad token {sent[:12]}; tail {sent[-10:]}; quoted {quote(sent)}; "
        f'header "Authorization: Bearer {sent}"; json {{"token": "{sent[3:]}"}}'
    )
    return PlainTextResponse(body, status_code=500)


@pytest.fixture(scope="module")
def echoing() -> Iterator[str]:
    server = ThreadedServer(Starlette(routes=[Route("/api/cli/verify", _echo)]), lifespan="off").start()
    yield server.url
    server.stop()


def test_an_error_body_echoing_pieces_of_the_token_shows_none_of_them(echoing: str) -> None:
    with pytest.raises(PlatformAPIError) as caught:
        client.call(client.VERIFY_PATH, token=TOKEN, base_url=echoing)
    message = str(caught.value)
    assert message.startswith(f"API error: HTTP 500 from {echoing}/api/cli/verify. Response: ")
    for i in range(len(TOKEN) - 5):
        assert TOKEN[i : i + 6] not in message, TOKEN[i : i + 6]
    assert "[redacted]" in message and "bad token" in message


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.localhost",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "http://0x7f.example",
    ],
)
def test_plain_http_to_a_name_that_only_looks_local_is_refused(url: str) -> None:
    with pytest.raises(PlatformURLError, match="tokens are sent only over https"):
        settings.normalize_platform_url(url)


@pytest.mark.parametrize("url", ["http://localhost:8000", "http://127.0.0.1:9", "http://[::1]:8080"])
def test_plain_http_to_the_loopback_itself_is_accepted(url: str) -> None:
    assert settings.normalize_platform_url(url) == url


async def _echo_other_credentials(request: Request) -> PlainTextResponse:
    body = (
        'upstream said: {"api_key": "sk-proj-Zq81nXw0", "detail": "Authorization: Bearer eyJhbGciOi.x"} '
        "password=hunter2hunter2 and a stray osm_live_9e1d2b3c4a5f60718293a4b5"
    )
    return PlainTextResponse(body, status_code=502)


def test_an_error_body_echoing_other_credentials_shows_none_of_them() -> None:
    app = Starlette(routes=[Route("/api/cli/verify", _echo_other_credentials)])
    with ThreadedServer(app, lifespan="off") as server, pytest.raises(PlatformAPIError) as caught:
        client.call(client.VERIFY_PATH, token=TOKEN, base_url=server.url)
    message = str(caught.value)
    for secret in ("sk-proj-Zq81nXw0", "eyJhbGciOi.x", "hunter2hunter2", "osm_live_9e1d2b3c4a5f60718293a4b5"):
        assert secret not in message, secret
    assert "upstream said" in message
