"""The browser flow over real sockets: an HTTP client plays the browser, following the stand-in
Platform's redirect to the loopback callback."""

from __future__ import annotations

import threading
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from osmosis_ai.auth import credentials as api
from osmosis_ai.auth.browser import browser_login
from osmosis_ai.auth.errors import LoginError
from tests.support.platform import StandInPlatform


class Browser:
    """Opens the login URL in a thread (as a browser would, while the CLI waits) and keeps the pages."""

    def __init__(self, before: Callable[[str], None] | None = None) -> None:
        self.pages: list[httpx.Response] = []
        self._before = before
        self._thread: threading.Thread | None = None

    def __call__(self, url: str, opened: bool) -> None:
        def visit() -> None:
            if self._before is not None:
                self._before(url)
            self.pages.append(httpx.get(url, follow_redirects=True, timeout=60))

        self._thread = threading.Thread(target=visit, daemon=True)
        self._thread.start()

    def last_page(self) -> httpx.Response:
        assert self._thread is not None
        self._thread.join(timeout=60)
        return self.pages[-1]


def callback_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["redirect_uri"][0]


def test_browser_login_end_to_end(on_platform: StandInPlatform):
    browser = Browser()
    result = browser_login(open_browser=False, timeout=30, on_url=browser)
    page = browser.last_page()
    assert page.status_code == 200 and "You are logged in" in page.text
    assert result.organization.name == "Acme"
    stored = api.get_valid_credentials()
    assert stored is not None and stored.access_token in on_platform.tokens
    (login_request,) = [r for r in on_platform.requests if r.path == "/cli-auth"]
    assert login_request.authorization is None


def test_a_callback_with_the_wrong_state_changes_nothing(on_platform: StandInPlatform):
    refused: list[httpx.Response] = []

    def forged_first(url: str) -> None:
        callback = callback_of(url)
        refused.append(httpx.get(callback, params={"token": "forged", "state": "wrong"}, timeout=10))
        refused.append(httpx.get(callback, params={"error": "access_denied", "state": "wrong"}, timeout=10))
        refused.append(httpx.get(callback, params={"error": "access_denied"}, timeout=10))

    browser = Browser(before=forged_first)
    result = browser_login(open_browser=False, timeout=30, on_url=browser)
    assert [r.status_code for r in refused] == [400, 400, 400]
    assert all("state mismatch" in r.text for r in refused)
    assert browser.last_page().status_code == 200
    assert result.user.email == "ada@example.com"


def test_an_error_redirect_fails_the_login(on_platform: StandInPlatform):
    on_platform.cli_auth = "access_denied"
    browser = Browser()
    with pytest.raises(LoginError, match="the user denied access"):
        browser_login(open_browser=False, timeout=30, on_url=browser)
    page = browser.last_page()
    assert page.status_code == 400 and "the user denied access" in page.text
    assert api.load_credentials() is None


def test_a_token_that_fails_verification_is_shown_as_failed(on_platform: StandInPlatform):
    on_platform.verify_expires_at = "2020-01-01T00:00:00+00:00"  # the Platform says it already expired
    browser = Browser()
    with pytest.raises(LoginError, match="expired"):
        browser_login(open_browser=False, timeout=30, on_url=browser)
    page = browser.last_page()
    assert page.status_code == 400 and "token verification failed" in page.text
    assert api.load_credentials() is None


def test_no_answer_times_out(on_platform: StandInPlatform):
    health: list[int] = []

    def probe(url: str, opened: bool) -> None:
        base = callback_of(url).rsplit("/", 1)[0]
        health.append(httpx.get(base + "/health", timeout=5).status_code)

    with pytest.raises(LoginError, match="timed out"):
        browser_login(open_browser=False, timeout=0.3, on_url=probe)
    assert health == [200]
