"""The seam for the SDK's own outgoing HTTP: a shared client, one retry policy, one status table.

* :func:`shared_pool` — the aiohttp session of the running event loop, holding at most
  ``max_connections`` connections, and at most ``per_host`` to any one host (one pool per
  ``(loop, max_connections, per_host)``). Every SDK-own call goes through one: the rollout client's
  chat calls and callbacks to TrainGate, TrainGate's inits to a rollout server, Platform
  registration, public-IP detection. Requests beyond a bound wait in aiohttp's connector queue of
  their host, so a host at its ``per_host`` bound holds up no other host. A rollout server's
  terminal callbacks use a pool of their own, bounded per host only (see
  ``osmosis_ai.rollout.server.delivery``). ``timeout`` bounds the wait for the server's answer (aiohttp's ``sock_read``), not the time
  spent queued for a connection, so a burst larger than the pool is not failed (and retried, making
  it worse) for waiting its turn; ``connect_timeout`` bounds opening a connection. The pool closes
  itself when its loop shuts down its async generators (``asyncio.run``, uvicorn and pytest-asyncio
  do), or explicitly with :func:`aclose_shared_transport`. Whatever serves or drives rollouts for a
  while (a rollout server's app, a launcher) holds its loop's pools (:func:`holding_shared_pools`):
  the last holder to leave closes them, so one of several servers in a loop stopping closes no
  connection another is using.
* :data:`RETRYABLE_STATUSES` — the answers worth asking again: 408, 425, 429 and every 5xx.
  No answer at all (refused, reset, timed out) is retryable too: :class:`NoAnswer`.
* :func:`parse_retry_after` / :func:`retry_after_from` — the server's ``Retry-After`` hint.
* :class:`RetryPolicy` — attempts, exponential back-off with jitter, and how the hint counts.
* :func:`retrying` — the retry loop over a policy, used by every SDK call that asks again
  (rollout callbacks, TrainGate's inits, model calls).
* :func:`redact` — an error body made safe to show: the secret that was sent, any piece of it, and
  anything that looks like a credential, masked.
* :class:`FailureLog` — repeated failures of one kind to one endpoint logged once per interval, the
  rest counted, so a dead endpoint costs a few lines a minute, not one per request.

Requests are sent as given: no redirects followed (unless asked), no proxy from the environment
(unless passed), JSON encoded by the caller. Errors: an HTTP answer of any status is returned as a
:class:`Response`; only the absence of an answer raises :class:`NoAnswer`, which callers translate
into their own domain's error.

There is one of it: ``tests/test_one_of_each.py::test_one_http_client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import re
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from osmosis_ai.consts import PACKAGE_VERSION

if TYPE_CHECKING:
    import aiohttp

USER_AGENT = f"osmosis-ai/{PACKAGE_VERSION}"
DEFAULT_MAX_CONNECTIONS = 100

T = TypeVar("T")

# -- which answers are worth asking again -------------------------------------------------------------

RETRYABLE_STATUSES = frozenset({408, 425, 429}) | frozenset(range(500, 600))
"""Request timeout, too early, too many requests, and every server error.

Not 409: TrainGate answers it for a rollout that is already complete, which asking again cannot change.
"""


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP answer with ``status`` is worth asking again (see :data:`RETRYABLE_STATUSES`)."""
    return status in RETRYABLE_STATUSES


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds (fractions tolerated) or an HTTP date.

    ``None`` when absent or unusable (not a number or date, negative, NaN, infinite); a date in the
    past means "now" (``0.0``).
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT; a zone-less one means the same
            from datetime import timezone

            when = when.replace(tzinfo=timezone.utc)
        return max(when.timestamp() - time.time(), 0.0)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def retry_after_from(headers: Any) -> float | None:
    """The hint in a header mapping: ``retry-after-ms`` (OpenAI-style) first, then ``Retry-After``.

    ``headers`` may be any mapping with ``get`` (case-insensitive ones such as aiohttp's or httpx's,
    or a plain dict with lower-case keys, as LiteLLM passes them); ``None`` when there is no usable hint.
    """
    if not headers:
        return None
    milliseconds = parse_retry_after(_header(headers, "retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    return parse_retry_after(_header(headers, "retry-after"))


def _header(headers: Any, name: str) -> str | None:
    value = headers.get(name)
    if value is None and isinstance(headers, dict):
        value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == name), None)
    return None if value is None else str(value)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to ask again.

    Attributes:
        max_attempts: requests allowed in all (1 = no retry).
        base_delay: the back-off after the first failed attempt, in seconds; it doubles per attempt.
        max_delay: cap on the back-off.
        max_retry_after: cap on how long a server's ``Retry-After`` can make us wait.
        jitter: draw each back-off uniformly from its upper half, so clients that failed together do
            not come back together.
        sleep: the coroutine used to wait (tests pass one that records instead of waiting).
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    jitter: bool = True
    sleep: Callable[[float], Awaitable[Any]] = field(default=asyncio.sleep, repr=False, compare=False)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based).

        The back-off, or the server's ``Retry-After`` (capped by ``max_retry_after``) when that is
        longer: never sooner than the server asked, never sooner than our own back-off.
        """
        ceiling = min(self.max_delay, self.base_delay * 2 ** max(attempt - 1, 0))
        wait = random.uniform(ceiling / 2, ceiling) if self.jitter else ceiling
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait

    def should_retry(self, attempt: int) -> bool:
        """Whether another request is allowed after failed attempt number ``attempt`` (1-based)."""
        return attempt < self.max_attempts


def _no_hint(exc: Exception) -> float | None:
    return None


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    retryable: Callable[[Exception], bool],
    retry_after: Callable[[Exception], float | None] = _no_hint,
    give_up: Callable[[float], bool] | None = None,
    on_retry: Callable[[int, Exception, float], object] | None = None,
) -> T:
    """Await ``attempt()`` until it returns, asking again under ``policy`` when it raises.

    The SDK's one retry loop. An exception ``retryable`` accepts is followed by the policy's wait
    (never shorter than ``retry_after(exc)``, the server's hint, capped by the policy) and another
    attempt, while the policy allows one; ``give_up(wait)`` may stop before a wait that would be
    pointless (a deadline it would outlast). ``on_retry(attempt, exc, wait)`` is called before each
    wait (logging, counting). Anything else, and the last failure, is raised unchanged.
    """
    number = 0
    while True:
        number += 1
        try:
            return await attempt()
        except Exception as exc:
            if not retryable(exc) or not policy.should_retry(number):
                raise
            wait = policy.delay(number, retry_after(exc))
            if give_up is not None and give_up(wait):
                raise
            if on_retry is not None:
                on_retry(number, exc, wait)
        await policy.sleep(wait)  # outside the handler: the failure's frames are not kept while waiting


# -- the shared client --------------------------------------------------------------------------------


class Response(NamedTuple):
    """An HTTP answer: status, raw body and the ``Retry-After`` header (``None`` if absent)."""

    status: int
    body: bytes
    retry_after: str | None


class TooLarge(Exception):
    """An answer's body was larger than the caller allows (it was not read whole)."""

    def __init__(self, url: str, limit: int) -> None:
        super().__init__(f"the answer from {url} is larger than {limit:,} bytes")
        self.limit = limit


async def _read_at_most(response: Any, limit: int, url: str) -> bytes:
    """The body of ``response``, or :class:`TooLarge` as soon as it passes ``limit`` bytes."""
    if (response.content_length or 0) > limit:
        raise TooLarge(url, limit)
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > limit:
            raise TooLarge(url, limit)
        chunks.append(chunk)
    return b"".join(chunks)


class NoAnswer(Exception):
    """The request got no HTTP answer: connection refused or reset, DNS failure, or a timeout.

    Internal to the SDK: every caller turns it into its own domain's error. ``timed_out`` tells a
    timeout from the other failures; the message names the underlying exception.
    """

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class Transport(Protocol):
    """What the rollout client needs to send a callback (the seam tests replace)."""

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, connect_timeout: float
    ) -> Response:
        """POST ``body``; raise :class:`NoAnswer` when nothing answers."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@lru_cache(maxsize=64)
def _client_timeout(answer: float, connect: float) -> aiohttp.ClientTimeout:
    import aiohttp

    return aiohttp.ClientTimeout(total=None, sock_connect=min(connect, answer), sock_read=answer)


class Pool:
    """A bounded aiohttp session, opened on first use inside the running event loop.

    With ``close_with_loop=True`` (the shared pools) the session is also closed when the loop shuts
    down its async generators, so code that never calls :func:`aclose_shared_transport` does not leak
    an unclosed session.
    """

    def __init__(
        self,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        *,
        per_host: int = 0,
        close_with_loop: bool = False,
    ) -> None:
        self.max_connections = max_connections  # 0: no bound over all hosts
        self.per_host = per_host  # 0: no bound per host
        self._session: aiohttp.ClientSession | None = None
        self._close_with_loop = close_with_loop
        self._closer: AsyncGenerator[None, None] | None = None

    @property
    def closed(self) -> bool:
        """Whether no session is open (never used, or closed; the next request opens a new one)."""
        return self._session is None or self._session.closed

    async def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=self.per_host)
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
            self._closer = None  # a later loop that uses this pool gets a closer of its own
            await self.aclose()

    async def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
        connect_timeout: float | None = None,
        follow_redirects: bool = False,
        proxy: str | None = None,
        max_bytes: int | None = None,
    ) -> Response:
        """Send one request and read the whole answer; raise :class:`NoAnswer` when there is none.

        ``timeout`` bounds waiting for the answer once the request is on a connection;
        ``connect_timeout`` (default ``timeout``) bounds opening that connection. An answer whose
        body is larger than ``max_bytes`` is not read on: :class:`TooLarge`.
        """
        import aiohttp

        session = self._session
        if session is None or session.closed:
            session = await self._open()
        try:
            async with session.request(
                method,
                url,
                data=body,
                headers=headers,
                timeout=_client_timeout(timeout, timeout if connect_timeout is None else connect_timeout),
                allow_redirects=follow_redirects,
                proxy=proxy,
            ) as response:
                data = (
                    await response.read()
                    if max_bytes is None
                    else await _read_at_most(response, max_bytes, url)
                )
                return Response(response.status, data, response.headers.get("Retry-After"))
        except asyncio.TimeoutError as exc:
            raise NoAnswer(
                f"no answer from {url} within {timeout:g}s ({_describe(exc)})", timed_out=True
            ) from exc
        except asyncio.CancelledError as exc:
            if _cancelled_from_outside():
                raise
            # aiohttp cancels the requests still waiting for a connection when the pool closes under them.
            raise NoAnswer(f"the connection pool closed before {url} answered", timed_out=False) from exc
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise NoAnswer(_describe(exc), timed_out=False) from exc

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, connect_timeout: float
    ) -> Response:
        """POST ``body`` (the :class:`Transport` form of :meth:`request`)."""
        return await self.request(
            "POST", url, body=body, headers=headers, timeout=timeout, connect_timeout=connect_timeout
        )

    async def aclose(self) -> None:
        """Close the session; idempotent. A later request opens a new one."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


def _cancelled_from_outside() -> bool:
    """Whether the running task is being cancelled (rather than one of its awaits cancelled under it);
    taken as so where Python (3.10) cannot tell."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or cancelling() > 0


_lock = threading.Lock()
_pools: dict[tuple[asyncio.AbstractEventLoop, int, int], Pool] = {}
_holders: dict[asyncio.AbstractEventLoop, int] = {}
_override: Transport | None = None


def shared_pool(max_connections: int = DEFAULT_MAX_CONNECTIONS, *, per_host: int = 0) -> Pool:
    """The running event loop's pool of ``max_connections`` connections, ``per_host`` to one host
    (0: unbounded), created on first use."""
    key = (asyncio.get_running_loop(), max_connections, per_host)
    pool = _pools.get(key)
    if pool is not None:
        return pool
    with _lock:
        for stale in [k for k in _pools if k[0].is_closed()]:  # loops that ended without closing
            del _pools[stale]
        return _pools.setdefault(key, Pool(max_connections, per_host=per_host, close_with_loop=True))


def set_transport(transport: Transport | None) -> Transport | None:
    """Route every rollout callback without its own transport through ``transport``; returns the previous.

    ``None`` restores the shared pools. Only the rollout client's callbacks consult it.
    """
    global _override
    with _lock:
        previous, _override = _override, transport
    return previous


def get_shared_transport(max_connections: int = DEFAULT_MAX_CONNECTIONS, *, per_host: int = 0) -> Transport:
    """The transport for rollout callbacks: the override if one is set, else the loop's shared pool."""
    override = _override
    return override if override is not None else shared_pool(max_connections, per_host=per_host)


@contextlib.asynccontextmanager
async def holding_shared_pools() -> AsyncIterator[None]:
    """Hold the running loop's shared pools for the block; the last holder to leave closes them."""
    loop = asyncio.get_running_loop()
    with _lock:
        _holders[loop] = _holders.get(loop, 0) + 1
    try:
        yield
    finally:
        with _lock:
            left = _holders.pop(loop) - 1
            if left:
                _holders[loop] = left
        if not left:
            await aclose_shared_transport()


async def aclose_shared_transport() -> None:
    """Close the shared pools of the running event loop. Idempotent; the override is left alone."""
    loop = asyncio.get_running_loop()
    with _lock:
        mine = [_pools.pop(key) for key in [k for k in _pools if k[0] is loop]]
    for pool in mine:
        await pool.aclose()


# A secret-looking value after a key-ish word, or a long unbroken token: what an error body may echo
# of the key or token a request carried, or of any other credential.
_SECRET = re.compile(
    r"(?i)((?:bearer|api[_-]?key|token|secret|password|authorization|key)[\"']?\s*[:=]?\s*[\"']?(?:bearer\s+)?)"
    r"[^\s\"',;}]{4,}"
    r"|[A-Za-z0-9_\-+/=.]{24,}"
)


def redact(text: str, secret: str | None = None) -> str:
    """``text`` with ``secret`` (and any 6+ character piece of it) and credential-looking values masked."""
    if secret:
        text = text.replace(secret, "[redacted]")
        size = min(len(secret), 6)
        pieces = {secret[i : i + size] for i in range(len(secret) - size + 1)} if len(secret) >= 6 else set()
        for piece in pieces:
            if piece in text:
                text = text.replace(piece, "[redacted]")
    return _SECRET.sub(lambda m: (m.group(1) or "") + "[redacted]", text)


REDACTED = "[redacted]"
# A setting or flag that names a secret: an API key, a token, a password; not ``max_tokens``.
_SECRET_NAME = re.compile(
    r"(?i)(?:^|[-_])(?:api[-_]?key|key|keys|token|secret|secrets|password|passwd|credentials?|authorization)$"
    r"|^(?:auth|secret|password|token)(?:[-_]|$)"
)
# Where a value carries a secret of its own: a URL's password, a secret-named query parameter, the
# shapes well-known providers give their keys.
_SECRET_IN_VALUE = re.compile(
    r"(?i)(?P<url>[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+(?=@)"
    r"|(?P<query>[?&][^=&\s]*(?:key|token|secret|password|signature|sig)=)[^&#\s]+"
    r"|(?P<bearer>\b(?:bearer|basic)\s+)\S+"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}|\b(?:ghp|gho|ghs|ghu|hf|glpat)_[A-Za-z0-9_]{12,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b"
)


def secret_name(name: str) -> bool:
    """Whether a setting or flag called ``name`` (``api_key``, ``--hf-token``) holds a secret."""
    return bool(_SECRET_NAME.search(name.lstrip("-")))


def redact_value(value: str) -> str:
    """``value`` with the secrets a value can carry masked (see ``_SECRET_IN_VALUE``)."""
    return _SECRET_IN_VALUE.sub(
        lambda m: (m.group("url") or m.group("query") or m.group("bearer") or "") + REDACTED, value
    )


def redact_command(argv: Sequence[str]) -> list[str]:
    """A command line fit to record: the value of every secret-named flag (``--api-key sk-...``,
    ``--token=...``) masked, and the secrets other arguments carry (:func:`redact_value`)."""
    shown: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            shown.append(REDACTED)
            hide_next = False
        elif arg.startswith("-") and secret_name(arg.partition("=")[0]):
            flag, equals, _ = arg.partition("=")
            shown.append(f"{flag}={REDACTED}" if equals else arg)
            hide_next = not equals
        else:
            shown.append(redact_value(arg))
    return shown


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Settings fit to record: secret-named ones left out, secrets in the others' text masked (in
    lists and nested mappings too)."""

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact_value(value)
        if isinstance(value, Mapping):
            return redact_config(value)
        if isinstance(value, (list, tuple)):
            return [clean(item) for item in value]
        return value

    return {name: clean(value) for name, value in config.items() if not secret_name(str(name))}


# -- failures worth one line a minute -----------------------------------------------------------------


def endpoint_of(url: str) -> str:
    """``scheme://host:port`` of ``url``: what a :class:`FailureLog` groups failures by."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


class FailureLog:
    """Log repeated failures of one kind to one endpoint once per ``interval`` seconds.

    The first failure of a ``(kind, endpoint)`` is logged as given; the next ones within the
    interval are only counted, and the first one after it is logged with that count ("...; 41 more
    like it in the last 60 s"). :meth:`flush` logs the counts still held. At most ``max_keys`` pairs
    are remembered (the oldest forgotten first). Thread-safe.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 60.0,
        *,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.max_keys = max_keys
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], list[Any]] = {}  # -> [logged at, held count, level, first message]

    def log(self, level: int, kind: str, endpoint: str, message: str, *args: object) -> None:
        """Log ``message % args`` at ``level`` unless a ``kind`` failure to ``endpoint`` was logged
        less than ``interval`` seconds ago (then it is counted)."""
        now = self.clock()
        key = (kind, endpoint)
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.interval:
                seen[1] += 1
                return
            held = 0 if seen is None else seen[1]
            self._seen.pop(key, None)
            while len(self._seen) >= self.max_keys:
                del self._seen[next(iter(self._seen))]
            self._seen[key] = [now, 0, level, kind]
        if held:
            message += "; %d more like it in the last %.0f s"
            args = (*args, held, self.interval)
        self.logger.log(level, message, *args)

    def flush(self) -> None:
        """Log the counts still held, one line per ``(kind, endpoint)``, and forget them."""
        with self._lock:
            held = [(key, seen) for key, seen in self._seen.items() if seen[1]]
            self._seen.clear()
        for (kind, endpoint), (_, count, level, _) in held:
            self.logger.log(level, "%s to %s: %d more not logged", kind, endpoint, count)
