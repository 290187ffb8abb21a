"""The one-shot loopback server that receives the token at the end of a browser login.

It binds ``127.0.0.1`` directly (no probe-then-bind race) on the first free port of
:data:`~osmosis_ai.auth.settings.CALLBACK_PORTS`, and serves ``GET /callback`` and ``GET /health``.

``/callback`` checks ``state`` first, on every request and with a constant-time comparison: a request
without the right state gets an error page and changes nothing, so another local page cannot end or
hijack the login. With the right state, ``error`` ends the login with that error; a ``token`` is handed
to the waiting flow, and the browser's request is held open until the flow has verified the token
with the Platform, so the page shows the real outcome.
"""

from __future__ import annotations

import html
import secrets
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from osmosis_ai.auth.errors import LoginError
from osmosis_ai.auth.settings import CALLBACK_PORTS

VERDICT_WAIT_SECONDS = 30.0

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Osmosis CLI: {title}</title>
<style>body{{font-family:system-ui,sans-serif;margin:4rem auto;max-width:32rem;text-align:center}}</style>
</head><body><h1>{title}</h1><p>{message}</p></body></html>
"""


def page(title: str, message: str) -> bytes:
    """A small HTML page; ``message`` is escaped."""
    return _PAGE.format(title=html.escape(title), message=html.escape(message)).encode("utf-8")


@dataclass
class CallbackOutcome:
    """What the browser brought back: a token (and how many older ones were revoked), or an error."""

    token: str | None = None
    error: str | None = None
    revoked_count: int = 0


class CallbackServer:
    """Serve the callback for one login with ``state``; use as a context manager (closes the socket)."""

    def __init__(self, state: str, *, ports: range = CALLBACK_PORTS) -> None:
        self.state = state
        self._outcome: CallbackOutcome | None = None
        self._arrived = threading.Event()
        self._verdict: tuple[bool, str] | None = None
        self._verdict_set = threading.Event()
        self._server = self._bind(ports)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="osmosis-login-callback", daemon=True
        )

    def _bind(self, ports: range) -> ThreadingHTTPServer:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        for port in ports:
            server = ThreadingHTTPServer(("127.0.0.1", port), Handler, bind_and_activate=False)
            # Closing joins the request threads, so the browser gets its page before the CLI exits;
            # the handler's socket timeout bounds that wait.
            server.daemon_threads = False
            try:
                server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                server.server_bind()
                server.server_activate()
            except OSError:  # taken: try the next one
                server.server_close()
                continue
            return server
        raise LoginError(
            f"no free port for the login callback in {ports.start}-{ports.stop - 1}; "
            "close what is using them, or use 'osmosis login --device'"
        )

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    def __enter__(self) -> CallbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        if not self._verdict_set.is_set():
            self.set_verdict(False, "the login did not complete")
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def wait(self, timeout: float) -> CallbackOutcome:
        """The first callback with the right state; :class:`LoginError` after ``timeout`` seconds."""
        if not self._arrived.wait(timeout):
            raise LoginError(
                f"authentication timed out after {timeout:g} s without an answer from the browser"
            )
        assert self._outcome is not None
        return self._outcome

    def set_verdict(self, ok: bool, message: str = "") -> None:
        """Tell the waiting browser page whether the token was accepted."""
        if not self._verdict_set.is_set():
            self._verdict = (ok, message)
            self._verdict_set.set()

    # -- called by the handler threads --

    def _accept(self, outcome: CallbackOutcome) -> bool:
        if self._arrived.is_set():
            return False
        self._outcome = outcome
        self._arrived.set()
        return True

    def _await_verdict(self) -> tuple[bool, str]:
        if not self._verdict_set.wait(VERDICT_WAIT_SECONDS):
            return False, "verification of the token timed out"
        assert self._verdict is not None
        return self._verdict


class _Handler(BaseHTTPRequestHandler):
    server_owner: CallbackServer
    server_version = "osmosis-login"
    sys_version = ""
    timeout = 10.0  # a connection that sends nothing is dropped rather than holding the login open

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the request line carries the token."""

    def _send(self, status: int, body: bytes, content_type: str = "text/html; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/health":
            self._send(200, b"OK", "text/plain")
            return
        if parts.path != "/callback":
            self._send(404, b"Not Found", "text/plain")
            return
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        owner = self.server_owner
        state = query.get("state", "")
        if not state or not secrets.compare_digest(state.encode(), owner.state.encode()):
            self._send(
                400,
                page("Login failed", "This login link is invalid or was not started here (state mismatch)."),
            )
            return
        if query.get("error"):
            message = query.get("error_description") or query["error"]
            owner._accept(CallbackOutcome(error=message))
            self._send(400, page("Login failed", message))
            return
        token = query.get("token")
        if not token:
            owner._accept(CallbackOutcome(error="the Platform sent no token"))
            self._send(400, page("Login failed", "The Platform sent no token."))
            return
        try:
            revoked = int(query.get("revoked_count", "0"))
        except ValueError:
            revoked = 0
        if not owner._accept(CallbackOutcome(token=token, revoked_count=revoked)):
            self._send(400, page("Login failed", "This login was already completed."))
            return
        ok, message = owner._await_verdict()
        if ok:
            self._send(
                200,
                page("Logged in", "You are logged in. You can close this tab and return to the terminal."),
            )
        else:
            self._send(400, page("Login failed", message))
