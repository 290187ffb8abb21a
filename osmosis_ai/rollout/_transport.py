"""The one HTTP connection pool per process (per event loop) that every ``OsmosisLLMClient`` shares.

osmosis-ai 0.2 opened a new httpx client, with fresh TCP/TLS, for every rollout. Here all clients of
an event loop post through one aiohttp session whose connector holds at most ``max_connections``
connections (keyed by ``(loop, max_connections)``, so differently-sized settings get their own pool).
aiohttp was chosen by measurement: ``python -m benchmarks.http_clients`` showed it 11-20x faster
than httpx for concurrent JSON POSTs on loopback.

A transport only moves bytes: ``post(url, body, headers, timeout, connect_timeout)`` returns the
status, body and ``Retry-After`` header, and raises ``OsmosisTimeoutError`` / ``OsmosisTransportError``
when there is no HTTP answer. Retries and status handling live in the client.

Callbacks beyond ``max_connections`` wait at the pool's gate, an ``asyncio.Semaphore`` of that size,
before aiohttp builds anything for them: a queued callback holds two small coroutine frames, not a
request object, timer and connector waiter (about 4 KB less Python heap per queued callback; with
5,000 rollouts running at once the server went from 25.0 to 18.5 KiB RSS per rollout with 100
connections, from 26.5 to 21.2 with 1000). ``timeout`` starts when the request has its slot: it
bounds TrainGate's answer, not the local queue, so a burst larger than the pool is not failed (and
retried, making it worse) for waiting its turn. The wait is still finite: slots free up as holders
get an answer or their own ``timeout``, and a rollout's deadline (``request_timeout_seconds``) bounds
its calls. ``connect_timeout`` bounds opening a connection, within ``timeout``.

Seams: ``OsmosisLLMClient(..., transport=...)`` for one client, or ``set_transport(t)`` for every
client of the process (``set_transport(None)`` restores the shared pools). ``HttpxTransport`` adapts any
``httpx.AsyncClient``, e.g. one with ``httpx.ASGITransport(app=...)`` to route callbacks to an
in-process FastAPI app in tests. ``aclose_shared_transport()`` closes the current loop's pools (the
server does it at shutdown); a later request opens a new pool.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple, Protocol

from osmosis_ai.consts import PACKAGE_VERSION
from osmosis_ai.rollout.core.exceptions import OsmosisTimeoutError, OsmosisTransportError

if TYPE_CHECKING:
    import aiohttp
    import httpx

USER_AGENT = f"osmosis-ai/{PACKAGE_VERSION}"


class TransportResponse(NamedTuple):
    """An HTTP answer: status, raw body and the ``Retry-After`` header (``None`` if absent)."""

    status: int
    body: bytes
    retry_after: str | None


class Transport(Protocol):
    """What the client needs from an HTTP transport."""

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, connect_timeout: float
    ) -> TransportResponse:
        """POST ``body``; raise ``OsmosisTimeoutError``/``OsmosisTransportError`` if nothing answers."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@lru_cache(maxsize=64)
def _aiohttp_timeout(total: float, connect: float) -> aiohttp.ClientTimeout:
    import aiohttp

    return aiohttp.ClientTimeout(total=total, sock_connect=min(connect, total))


class AiohttpTransport:
    """A pooled aiohttp session, opened on first use inside the running event loop.

    With ``close_with_loop=True`` (the shared pools) the session is also closed when the loop shuts
    down its async generators (``asyncio.run``, uvicorn, pytest-asyncio do), so code that never calls
    ``aclose_shared_transport()`` does not leak an unclosed session.
    """

    def __init__(self, max_connections: int = 100, *, close_with_loop: bool = False) -> None:
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        self._close_with_loop = close_with_loop
        self._closer: AsyncGenerator[None, None] | None = None

    async def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0)
        self._session = aiohttp.ClientSession(
            connector=connector, headers={"User-Agent": USER_AGENT}, raise_for_status=False
        )
        if self._close_with_loop and self._closer is None:
            self._closer = self._close_at_loop_shutdown()
            await self._closer.asend(None)  # parked: the loop's shutdown_asyncgens() resumes it
        return self._session

    async def _close_at_loop_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self.aclose()

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, connect_timeout: float
    ) -> TransportResponse:
        slots = self._slots
        if slots is None:
            slots = self._slots = asyncio.Semaphore(self.max_connections)
        # Queued here, not inside aiohttp (see the module docstring); acquire() rather than `async with`
        # spares each waiting callback one more coroutine frame.
        await slots.acquire()
        try:
            return await self._send(url, body, headers, timeout, connect_timeout)
        finally:
            slots.release()

    async def _send(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, connect_timeout: float
    ) -> TransportResponse:
        import aiohttp

        session = self._session
        if session is None or session.closed:
            session = await self._open()
        try:
            async with session.post(
                url,
                data=body,
                headers=headers,
                timeout=_aiohttp_timeout(timeout, connect_timeout),
                allow_redirects=False,
            ) as response:
                data = await response.read()
                return TransportResponse(response.status, data, response.headers.get("Retry-After"))
        except asyncio.TimeoutError as exc:
            raise OsmosisTimeoutError(f"no answer from {url} within {timeout:g}s ({_describe(exc)})") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise OsmosisTransportError(_describe(exc)) from exc

    async def aclose(self) -> None:
        # Callbacks already waiting keep their gate; the next ones (possibly on another loop) get a new one.
        session, self._session, self._slots = self._session, None, None
        if session is not None and not session.closed:
            await session.close()


class HttpxTransport:
    """Adapter for an ``httpx.AsyncClient`` (closed by ``aclose`` only if ``owns_client``)."""

    def __init__(self, client: httpx.AsyncClient, *, owns_client: bool = False) -> None:
        self.client = client
        self.owns_client = owns_client

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, connect_timeout: float
    ) -> TransportResponse:
        import httpx

        try:
            response = await self.client.post(
                url,
                content=body,
                headers=dict(headers),
                timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            )
        except httpx.TimeoutException as exc:
            raise OsmosisTimeoutError(f"no answer from {url} within {timeout:g}s ({_describe(exc)})") from exc
        except httpx.RequestError as exc:
            raise OsmosisTransportError(_describe(exc)) from exc
        return TransportResponse(response.status_code, response.content, response.headers.get("Retry-After"))

    async def aclose(self) -> None:
        if self.owns_client:
            await self.client.aclose()


_lock = threading.Lock()
_pools: dict[tuple[asyncio.AbstractEventLoop, int], AiohttpTransport] = {}
_override: Transport | None = None


def set_transport(transport: Transport | None) -> Transport | None:
    """Route every client without its own transport through ``transport``; returns the previous one.

    ``None`` restores the shared aiohttp pools.
    """
    global _override
    with _lock:
        previous, _override = _override, transport
    return previous


def get_shared_transport(max_connections: int = 100) -> Transport:
    """The transport for the running event loop: the override if set, else the loop's shared pool."""
    override = _override
    if override is not None:
        return override
    key = (asyncio.get_running_loop(), max_connections)
    pool = _pools.get(key)
    if pool is not None:
        return pool
    with _lock:
        for stale in [k for k in _pools if k[0].is_closed()]:  # loops that ended without closing
            del _pools[stale]
        return _pools.setdefault(key, AiohttpTransport(max_connections, close_with_loop=True))


async def aclose_shared_transport() -> None:
    """Close the shared pools of the running event loop. Idempotent; the override is left alone."""
    loop = asyncio.get_running_loop()
    with _lock:
        mine = [_pools.pop(key) for key in [k for k in _pools if k[0] is loop]]
    for pool in mine:
        await pool.aclose()
