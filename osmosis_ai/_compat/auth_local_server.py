"""0.2's ``osmosis_ai.auth.local_server``: the login callback server, as adapters over
:mod:`osmosis_ai.auth.callback`.

:class:`LocalAuthServer` keeps 0.2's interface (``port``, ``expected_state``, ``wait_for_callback``,
``set_verification_result``, ``received_token``, ``error``, ``revoked_count``, ``shutdown``) and
serves the requests the way :class:`~osmosis_ai.auth.callback.CallbackServer` does: bound to
127.0.0.1 and checking ``state`` on every request. :data:`AuthCallbackHandler` is the request
handler class; :func:`find_available_port` the first free port of the callback range.
"""

from __future__ import annotations

import socket

from osmosis_ai.auth.callback import CallbackOutcome, CallbackServer
from osmosis_ai.auth.callback import _Handler as AuthCallbackHandler
from osmosis_ai.auth.errors import LoginError
from osmosis_ai.auth.settings import CALLBACK_PORTS

__all__ = [
    "AuthCallbackHandler",
    "CallbackOutcome",
    "CallbackServer",
    "LocalAuthServer",
    "find_available_port",
]


class LocalAuthServer:
    """The callback server of one login on ``port``, expecting ``expected_state``."""

    def __init__(self, port: int, expected_state: str) -> None:
        self.expected_state = expected_state
        self.received_token: str | None = None
        self.error: str | None = None
        self.revoked_count = 0
        self._server = CallbackServer(expected_state, ports=range(port, port + 1))
        self.server_address = ("127.0.0.1", self._server.port)
        self._started = False

    def wait_for_callback(self, timeout: float = 300.0) -> tuple[str | None, str | None]:
        """Serve until the browser calls back: ``(token, None)`` or ``(None, error)``."""
        if not self._started:
            self._server.__enter__()
            self._started = True
        try:
            outcome = self._server.wait(timeout)
        except LoginError:
            return None, "Authentication timed out"
        self.received_token, self.error, self.revoked_count = (
            outcome.token,
            outcome.error,
            outcome.revoked_count,
        )
        return outcome.token, outcome.error

    def set_verification_result(self, success: bool, error: str | None = None) -> None:
        """Tell the waiting browser page whether the token was accepted."""
        self._server.set_verdict(success, error or "Verification failed")

    def shutdown(self) -> None:
        self._server.close()

    def server_close(self) -> None:
        self._server.close()


def find_available_port() -> int | None:
    """The first port of the callback range (8976-8985) free on 127.0.0.1, or ``None``."""
    for port in CALLBACK_PORTS:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return None
