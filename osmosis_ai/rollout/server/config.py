"""``ServerConfig``: every knob of a RolloutServer, each in one place.

A knob is either the environment's or the program's:

* ``server`` (:class:`~osmosis_ai.rollout.config.settings.RolloutServerSettings`,
  ``OSMOSIS_ROLLOUT_SERVER_*``) holds how rollouts run and are delivered: concurrency, record TTL,
  deadline, queue limit, shutdown grace, delivery window, the outbox file and its age limit, the
  request-head limits (timeout, size, header count).
  ``client`` (``OSMOSIS_ROLLOUT_CLIENT_*``) holds how callbacks reach TrainGate. Left out, both are
  the process settings (``get_settings()``) at the time the config is made.
* every other field is the program's; no environment variable sets it.

``create_app(agent, config=...)`` builds the app from it, and ``serve_agent_loop(agent,
config=...)`` serves it; the keyword parameters both had before the config are mapped onto it by
:func:`from_keywords` (the knob a keyword names lives only in the config).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osmosis_ai.rollout.config.settings import (
    RolloutClientSettings,
    RolloutServerSettings,
    RolloutSettings,
    get_settings,
)
from osmosis_ai.rollout.core.exceptions import RolloutValueError

if TYPE_CHECKING:
    from osmosis_ai.rollout.server.registration import RegistrationResult

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CONCURRENT_INITS = 64

LifecycleHook = Callable[[], Awaitable[Any]]


def _server_settings() -> RolloutServerSettings:
    return get_settings().server


def _client_settings() -> RolloutClientSettings:
    return get_settings().client


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """How one RolloutServer runs (see the module docstring for ``server`` and ``client``).

    * ``api_key``: the key TrainGate must send; ``None`` turns authentication off
      (``/platform/health`` then answers 404). ``serve_agent_loop`` generates one instead, unless
      it serves in local debug mode.
    * ``debug_dir``: per-rollout JSONL traces go there (``serve_agent_loop`` uses a
      ``<debug_dir>/<unix time>/`` directory per session).
    * ``host``, ``port``: where the server listens. ``create_app`` uses them only to register: with
      ``credentials`` (an object with an ``access_token``) and both set, the server registers with
      the Osmosis Platform once it answers ``/health``, and hands the ``RegistrationResult`` to
      ``on_registration`` (without one it is logged).
    * ``on_startup``, ``on_shutdown``: zero-argument async callables run in the app's lifespan.
    * ``docs_enabled``: serve ``/docs``, ``/redoc`` and ``/openapi.json`` (off: they are
      unauthenticated and describe the server to anyone who can reach it).
    * ``max_request_bytes``: init bodies above this size get 413, refused before they are read.
    * ``max_concurrent_inits``: inits handled at once; the rest wait, unparsed, which keeps a burst
      of inits cheap in memory. Raise it for an ``async def get_tools`` that waits on slow I/O.
    * ``tools_exclude_none``: leave ``null`` fields out of the init response's tool schemas
      (strict OpenAI-style consumers reject ``"description": null``).
    * ``metrics``: serve Prometheus figures at ``GET /metrics`` (:mod:`osmosis_ai.observe.metrics`).
      ``None``: when ``prometheus-client`` is installed (the ``prometheus`` extra); ``True`` requires it.
    """

    server: RolloutServerSettings = field(default_factory=_server_settings)
    client: RolloutClientSettings = field(default_factory=_client_settings)
    api_key: str | None = None
    debug_dir: str | None = None
    host: str | None = None
    port: int | None = None
    credentials: Any = field(default=None, repr=False)
    on_registration: Callable[[RegistrationResult], object] | None = None
    on_startup: LifecycleHook | None = None
    on_shutdown: LifecycleHook | None = None
    docs_enabled: bool = False
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_concurrent_inits: int = DEFAULT_MAX_CONCURRENT_INITS
    tools_exclude_none: bool = False
    metrics: bool | None = None
    # -- several processes serving one agent (``--workers``, ``--state``) --------------------------------
    # ``state``: where the dedupe claims shared with other processes live (state_shared.py): None = this
    # process only; a ``redis://HOST:PORT/DB`` URL (replicas on any hosts); an SQLite file (the
    # processes of one host; ``serve_agent_loop(workers=N)`` picks one beside the outbox).
    state: str | None = None

    def __post_init__(self) -> None:
        if self.state is not None:
            from osmosis_ai.rollout.server.state_redis import check_location

            check_location(self.state)
        if self.max_request_bytes <= 0:
            raise RolloutValueError(f"max_request_bytes must be > 0, got {self.max_request_bytes!r}")
        if self.max_concurrent_inits <= 0:
            raise RolloutValueError(f"max_concurrent_inits must be > 0, got {self.max_concurrent_inits!r}")
        if self.port is not None and not 0 < self.port < 65536:
            raise RolloutValueError(f"port must be between 1 and 65535, got {self.port!r}")

    @property
    def registers(self) -> bool:
        """Whether the app registers with the Platform once it is up."""
        return self.credentials is not None and self.host is not None and self.port is not None

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
        if shown.get("api_key") is not None:
            shown["api_key"] = "***"
        return f"ServerConfig({', '.join(f'{name}={value!r}' for name, value in shown.items())})"


def _positive(value: float, name: str) -> float:
    if value <= 0:
        raise RolloutValueError(f"{name} must be > 0, got {value!r}")
    return value


# keyword -> how it is written in a ServerConfig (for the message refusing both)
_WHERE = {
    "max_concurrent": "server=RolloutServerSettings(max_concurrent_rollouts=...)",
    "record_ttl_seconds": "server=RolloutServerSettings(record_ttl_seconds=...)",
    "settings": "server=settings.server, client=settings.client",
    "server_host": "host=...",
    "server_port": "port=...",
}


def from_keywords(caller: str, config: ServerConfig | None, **keywords: Any) -> ServerConfig:
    """``config``, or the config the keyword parameters of ``caller`` describe; never both.

    A keyword left at ``None`` is not given. ``max_concurrent`` and ``record_ttl_seconds`` replace
    the environment's ``max_concurrent_rollouts`` and ``record_ttl_seconds`` and only need to be
    positive (the environment's ranges bound what a deployment may set, not what a program may).
    Raises ``RolloutValueError`` for a config together with keywords, naming where they go instead.
    """
    given = {name: value for name, value in keywords.items() if value is not None}
    if config is not None:
        if given:
            where = "; ".join(f"{name} -> ServerConfig({_WHERE.get(name, name + '=...')})" for name in given)
            raise RolloutValueError(
                f"{caller}() got config= and {', '.join(f'{name}=' for name in given)}: "
                f"give every option once, in the config ({where})"
            )
        return config
    settings: RolloutSettings = given.pop("settings", None) or get_settings()
    server = settings.server
    overrides: dict[str, Any] = {}
    if "max_concurrent" in given:
        overrides["max_concurrent_rollouts"] = int(_positive(given.pop("max_concurrent"), "max_concurrent"))
    if "record_ttl_seconds" in given:
        overrides["record_ttl_seconds"] = _positive(given.pop("record_ttl_seconds"), "record_ttl_seconds")
    if overrides:
        server = server.model_copy(update=overrides)
    if "server_host" in given:
        given["host"] = given.pop("server_host")
    if "server_port" in given:
        given["port"] = given.pop("server_port")
    return ServerConfig(server=server, client=settings.client, **given)
