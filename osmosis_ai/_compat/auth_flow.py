"""0.2's ``osmosis_ai.auth.flow``: ``login`` (browser flow), over :mod:`osmosis_ai.auth.browser`."""

from __future__ import annotations

import logging

from osmosis_ai.auth.browser import browser_login
from osmosis_ai.auth.errors import LoginError
from osmosis_ai.auth.session import LoginResult

__all__ = ["LoginError", "LoginResult", "login"]

logger = logging.getLogger("osmosis_ai.auth")


def login(no_browser: bool = False, timeout: float = 300.0) -> LoginResult:
    """Log in through the browser and store the credentials.

    The login URL is logged (logger ``osmosis_ai.auth``, level WARNING) so it can be copied; pass
    ``on_url`` to :func:`osmosis_ai.auth.browser.browser_login` to show it some other way.
    """

    def log_url(url: str, opened: bool) -> None:
        logger.warning("%s the login page: %s", "Opened" if opened else "Open", url)

    return browser_login(open_browser=not no_browser, timeout=timeout, on_url=log_url)
