"""Browser login: the Platform's ``/cli-auth`` page sends the token to a loopback callback on this machine."""

from __future__ import annotations

import secrets
import webbrowser
from collections.abc import Callable
from urllib.parse import urlencode

from osmosis_ai.auth import settings
from osmosis_ai.auth.callback import CallbackServer
from osmosis_ai.auth.errors import LoginError
from osmosis_ai.auth.session import LoginResult, complete_login

LOGIN_PAGE_PATH = "/cli-auth"


def login_url(base_url: str, *, state: str, port: int, redirect_uri: str, device_name: str) -> str:
    query = urlencode(
        {"state": state, "port": port, "device_name": device_name, "redirect_uri": redirect_uri}
    )
    return f"{base_url}{LOGIN_PAGE_PATH}?{query}"


def browser_login(
    *,
    open_browser: bool = True,
    timeout: float = 300.0,
    on_url: Callable[[str, bool], object] | None = None,
) -> LoginResult:
    """Run the browser flow against the current Platform; store and return the verified login.

    ``on_url(url, opened)`` is told the login URL and whether a browser was opened on it (the caller
    shows it, so it can be copied). Raises :class:`LoginError`.
    """
    base_url = settings.platform_url()
    state = secrets.token_urlsafe(32)
    with CallbackServer(state) as server:
        url = login_url(
            base_url,
            state=state,
            port=server.port,
            redirect_uri=server.redirect_uri,
            device_name=settings.device_name(),
        )
        opened = False
        if open_browser:
            try:
                opened = webbrowser.open(url)
            except webbrowser.Error:
                opened = False
        if on_url is not None:
            on_url(url, opened)
        outcome = server.wait(timeout)
        if outcome.error is not None:
            raise LoginError(f"authentication failed: {outcome.error}")
        assert outcome.token is not None
        try:
            result = complete_login(outcome.token, base_url=base_url, revoked_count=outcome.revoked_count)
        except LoginError as exc:
            server.set_verdict(False, str(exc))
            raise
        server.set_verdict(True)
        return result
