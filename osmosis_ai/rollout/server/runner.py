"""Running a RolloutServer app under uvicorn with a graceful drain while HTTP is still up.

``uvicorn.Server.shutdown`` closes the listening sockets first and only then runs the app's lifespan
shutdown, so a drain done there is invisible to TrainGate. :class:`DrainingServer` drains first:
inits are answered 503 with ``Retry-After`` and ``/health`` reports ``"draining"`` while in-flight
rollouts get their grace period; then uvicorn's normal shutdown runs. A second Ctrl-C (uvicorn's
force exit) cuts the drain short.

:func:`head_limited_protocol` bounds request heads before the app (and its authentication) sees
them. It closes connections that do not finish a head in time: uvicorn's keep-alive timer only
covers idle connections between requests, so a client that opens a connection and sends part of a
header (or nothing) holds a file descriptor for good, and a few hundred of them exhaust a low
descriptor limit. And it answers 431 to a head over ``max_head_bytes`` or with more than
``max_headers`` fields, then closes: httptools buffers a header of any length and uvicorn keeps any
number of them, so an endless header grew the process by hundreds of MiB and stalled ``/health``.
The parser holds at most the limit plus one read (64 KiB) of a head.

:func:`tune_gc` is for an application that owns its process (the ``osmosis serve`` command) to call
before serving; the library never calls it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
from typing import Any

import uvicorn

from osmosis_ai.rollout.server.errors import ServerStartError

DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_HEAD_BYTES = 16 * 1024
DEFAULT_MAX_HEADERS = 100
_LINGER_SECONDS = 1.0


class DrainingServer(uvicorn.Server):
    """A ``uvicorn.Server`` for an app from ``create_app`` (see the module docstring)."""

    def __init__(self, config: uvicorn.Config, app: Any) -> None:
        super().__init__(config)
        self._lifecycle = app.state.rollout_lifecycle

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        drain = asyncio.ensure_future(self._lifecycle.drain())
        while not drain.done() and not self.force_exit:
            await asyncio.wait({drain}, timeout=0.1)
        await super().shutdown(sockets)


def head_limited_protocol(
    timeout_seconds: float,
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES,
    max_headers: int = DEFAULT_MAX_HEADERS,
) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with the limits of the module docstring on every request head.

    The clock starts when the connection opens and again when a later request on it begins; it
    stops when the head is complete (a slow body is the app's to bound). Raises ``ImportError``
    without httptools (part of ``uvicorn[standard]``, which the server extra installs).
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeadLimitedProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        _in_head = True
        _received = 0  # bytes read while the head is not complete
        _head_size = 0  # of the URL and the header fields parsed so far
        _fields = 0
        _refusal: str | None = None
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(timeout_seconds, self._head_too_slow)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return  # the rest of a refused request, read and dropped until the connection closes
            if self._in_head:
                self._received += len(data)
            super().data_received(data)
            if self._refusal is None and self._in_head and self._received > max_head_bytes:
                self._refusal = f"the request head exceeds {max_head_bytes} bytes"
            if self._refusal is not None:
                self._refuse(self._refusal)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head, self._received, self._head_size, self._fields = True, 0, 0, 0
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(timeout_seconds, self._head_too_slow)

        def on_url(self, url: bytes) -> None:
            self._head_size += len(url)
            if self._head_size > max_head_bytes:
                self._refusal = f"the request head exceeds {max_head_bytes} bytes"
            if self._refusal is None:
                super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._fields += 1
            self._head_size += len(name) + len(value) + 4  # ": " and CRLF
            if self._fields > max_headers:
                self._refusal = self._refusal or f"the request has more than {max_headers} header fields"
            elif self._head_size > max_head_bytes:
                self._refusal = self._refusal or f"the request head exceeds {max_head_bytes} bytes"
            if self._refusal is None:
                super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._stop_head_timer()
            self._in_head, self._received = False, 0
            if self._refusal is None:  # a refused request never reaches the app
                super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            if self._refusal is None:
                super().on_body(body)

        def on_message_complete(self) -> None:
            if self._refusal is None:
                super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            self.transport.close()

        def _refuse(self, reason: str) -> None:
            """431, then close once the client had time to read it: closing at once, with its
            request still arriving, would reset the connection and lose the answer."""
            self._stop_head_timer()
            self._refused = True
            body = f"{reason}; send a smaller request head".encode()
            head = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
            head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
            head.append(b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n" % len(body))
            self.transport.write(b"".join([*head, b"connection: close\r\n\r\n", body]))
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(_LINGER_SECONDS, self.transport.close)

    return HeadLimitedProtocol


GC_THRESHOLDS = (10_000, 50, 50)


def tune_gc() -> None:
    """Tune the garbage collector of this process for a request server.

    Objects that exist now (modules, the app) are frozen out of collections, and the young generation
    is collected less often: nearly every per-request object dies by reference counting, so the
    default threshold runs collections, full ones included, that find almost nothing. The
    ``tune_gc`` line of ``benchmarks/rollout_server.py`` measures what this buys.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run_app(
    app: Any,
    *,
    host: str,
    port: int,
    sock: socket.socket | None = None,
    header_timeout_seconds: float | None = DEFAULT_HEADER_TIMEOUT_SECONDS,
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES,
    max_headers: int = DEFAULT_MAX_HEADERS,
    **options: Any,
) -> None:
    """``uvicorn.run(app, ...)`` with :class:`DrainingServer`; :class:`ServerStartError` if start-up fails.

    ``sock``: an already bound socket to serve on (``host``/``port`` then only name it).
    ``header_timeout_seconds``, ``max_head_bytes``, ``max_headers``: see :func:`head_limited_protocol`
    (``header_timeout_seconds=None``: uvicorn's own protocol). Without httptools, uvicorn's h11
    protocol bounds the head at ``max_head_bytes`` (a 400, without a count limit).
    """
    options.setdefault("h11_max_incomplete_event_size", max_head_bytes)
    if header_timeout_seconds is not None and options.get("http", "auto") in ("auto", "httptools"):
        with contextlib.suppress(ImportError):
            options["http"] = head_limited_protocol(header_timeout_seconds, max_head_bytes, max_headers)
    server = DrainingServer(uvicorn.Config(app, host=host, port=port, **options), app)
    try:
        # uvicorn re-raises a captured Ctrl-C after shutting down
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=None if sock is None else [sock])
    except SystemExit:
        if server.started:
            raise
        # uvicorn ends the process when the app's start-up fails: the caller decides that here
    if not server.started:
        raise ServerStartError("the server did not start; the reason is logged above")
