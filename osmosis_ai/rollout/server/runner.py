"""Running a RolloutServer app under uvicorn with a graceful drain while HTTP is still up.

``uvicorn.Server.shutdown`` closes the listening sockets first and only then runs the app's lifespan
shutdown, so a drain done there is invisible to TrainGate. :class:`DrainingServer` drains first:
inits are answered 503 with ``Retry-After`` and ``/health`` reports ``"draining"`` while in-flight
rollouts get their grace period; then uvicorn's normal shutdown runs. A second Ctrl-C (uvicorn's
force exit) cuts the drain short.

:func:`header_timeout_protocol` closes connections that do not finish a request head in time:
uvicorn's keep-alive timer only covers idle connections between requests, so a client that opens
a connection and sends part of a header (or nothing) holds a file descriptor for good, and a few
hundred of them exhaust a low descriptor limit.

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

DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0


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


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, closing a connection whose request head is not complete within ``seconds``.

    The clock starts when the connection opens and again when a later request on it begins; it
    stops when the head is complete (a slow body is the app's to bound). Raises ``ImportError``
    without httptools (part of ``uvicorn[standard]``, which the server extra installs).
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(seconds, self._head_too_slow)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(seconds, self._head_too_slow)

        def on_headers_complete(self) -> None:
            self._stop_head_timer()
            super().on_headers_complete()

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

    return HeaderTimeoutProtocol


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
    **options: Any,
) -> None:
    """``uvicorn.run(app, ...)`` with :class:`DrainingServer`; exit status 3 if start-up fails.

    ``sock``: an already bound socket to serve on (``host``/``port`` then only name it).
    ``header_timeout_seconds``: see :func:`header_timeout_protocol` (``None``: uvicorn's own protocol).
    """
    if header_timeout_seconds is not None and options.get("http", "auto") in ("auto", "httptools"):
        with contextlib.suppress(ImportError):
            options["http"] = header_timeout_protocol(header_timeout_seconds)
    server = DrainingServer(uvicorn.Config(app, host=host, port=port, **options), app)
    with contextlib.suppress(
        KeyboardInterrupt
    ):  # uvicorn re-raises the captured Ctrl-C after a clean shutdown
        server.run(sockets=None if sock is None else [sock])
    if not server.started:
        raise SystemExit(3)  # uvicorn's STARTUP_FAILURE, as uvicorn.run does; the reason is already logged
