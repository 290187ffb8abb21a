"""Settings of the rollout client and server, read from environment variables and ``.env``.

Names, defaults, ranges and prefixes are a public contract (deployments set them), kept stable:

* ``RolloutClientSettings``: ``OSMOSIS_ROLLOUT_CLIENT_<FIELD>`` (timeouts, retries, connection pool)
* ``RolloutServerSettings``: ``OSMOSIS_ROLLOUT_SERVER_<FIELD>`` (concurrency, record TTL, registration)
* ``RolloutSettings``: ``OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES`` plus the two groups above

Out-of-range values raise ``pydantic.ValidationError``. The metadata limit is applied to request
validation (``RolloutRequest``): ``configure()`` sets it, ``get_settings()`` adopts it unless it was set
explicitly with ``set_max_metadata_size_bytes()``.
"""

from __future__ import annotations

import threading

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.core.schemas import (
    DEFAULT_MAX_METADATA_SIZE_BYTES,
    _adopt_metadata_limit_default,
    _reset_metadata_limit,
    set_max_metadata_size_bytes,
)


def _config(prefix: str) -> SettingsConfigDict:
    return SettingsConfigDict(
        env_prefix=prefix, env_file=".env", env_file_encoding="utf-8", extra="ignore", validate_default=True
    )


class RolloutClientSettings(BaseSettings):
    """How ``OsmosisLLMClient`` talks to TrainGate.

    ``max_connections`` bounds the process-wide pool shared by all rollouts of an event loop.
    ``max_keepalive_connections`` is accepted for compatibility; the aiohttp pool keeps idle
    connections up to ``max_connections``. ``connect_timeout_seconds`` bounds TCP connection set-up
    within ``timeout_seconds``.
    """

    model_config = _config("OSMOSIS_ROLLOUT_CLIENT_")

    timeout_seconds: float = Field(default=300.0, ge=1.0, le=3600.0)
    max_retries: int = Field(default=3, ge=0, le=10)
    complete_rollout_retries: int = Field(default=2, ge=0, le=10)
    retry_base_delay: float = Field(default=1.0, ge=0.1, le=60.0)
    retry_max_delay: float = Field(default=30.0, ge=1.0, le=300.0)
    max_connections: int = Field(default=100, ge=1, le=1000)
    max_keepalive_connections: int = Field(default=20, ge=1, le=100)
    connect_timeout_seconds: float = Field(default=10.0, ge=0.1, le=300.0)


class RolloutServerSettings(BaseSettings):
    """How the RolloutServer runs rollouts, sheds load, shuts down and registers with the Platform.

    ``max_queued_rollouts``: with a limit, init answers 429 with ``Retry-After`` once that many
    rollouts wait for a slot, instead of queueing without bound (``None``, the default).
    ``shutdown_grace_seconds``: on shutdown, in-flight rollouts get this long, then ERROR callbacks.
    ``request_timeout_seconds``: the per-rollout deadline for ``get_tools`` and ``run``; 0 turns it
    off. ``abandon_grace_seconds``: how long an agent that ignores the deadline's cancellation may
    go on before its rollout is abandoned (ERROR sent, slot freed).
    ``delivery_window_seconds``: how long a terminal callback is retried before it waits for a
    retried init or the next start; ``outbox_max_age_seconds``: how long after its rollout ended an
    unacknowledged callback is kept at most (across restarts), then dropped. ``outbox_path``: the SQLite file that keeps unacknowledged
    callbacks across restarts (``None``: in memory for ``create_app``; ``serve_agent_loop`` picks a
    file, see ``osmosis_ai.rollout.server.serve``). ``header_timeout_seconds``: a connection that has
    not sent a complete request head within this time is closed; ``max_head_bytes``,
    ``max_headers``: a request head larger, or with more header fields, is answered 431 and its
    connection closed, before authentication (``serve_agent_loop``).
    ``owner_lease_seconds``: with a shared state (``--state``), how long a process's heartbeat keeps
    it alive there: a process that died is seen dead by the others this long after its last beat.
    See docs/design/rollout-server.md for why each exists and docs/compatibility.md for the defaults.
    """

    model_config = _config("OSMOSIS_ROLLOUT_SERVER_")

    max_concurrent_rollouts: int = Field(default=100, ge=1, le=10000)
    record_ttl_seconds: float = Field(default=3600.0, ge=60.0, le=86400.0)
    cleanup_interval_seconds: float = Field(default=60.0, ge=10.0, le=3600.0)
    request_timeout_seconds: float = Field(default=600.0, ge=0.0, le=3600.0)
    registration_readiness_timeout_seconds: float = Field(default=10.0, ge=1.0, le=60.0)
    registration_readiness_poll_interval_seconds: float = Field(default=0.2, ge=0.05, le=5.0)
    registration_shutdown_timeout_seconds: float = Field(default=30.0, ge=1.0, le=300.0)
    max_queued_rollouts: int | None = Field(default=None, ge=0)
    shutdown_grace_seconds: float = Field(default=10.0, ge=0.0, le=3600.0)
    abandon_grace_seconds: float = Field(default=10.0, ge=0.0, le=600.0)
    delivery_window_seconds: float = Field(default=900.0, ge=1.0, le=86400.0)
    outbox_path: str | None = None
    outbox_max_age_seconds: float = Field(default=3600.0, ge=60.0, le=604800.0)
    header_timeout_seconds: float = Field(default=10.0, ge=0.1, le=600.0)
    max_head_bytes: int = Field(default=16384, ge=1024, le=1048576)
    max_headers: int = Field(default=100, ge=10, le=10000)
    owner_lease_seconds: float = Field(default=10.0, ge=1.0, le=600.0)

    @field_validator("request_timeout_seconds")
    @classmethod
    def _no_deadline_or_at_least_ten_seconds(cls, value: float) -> float:
        if 0 < value < 10:
            raise ValueError("must be 0 (no deadline) or between 10 and 3600 seconds")
        return value


class RolloutSettings(BaseSettings):
    """All rollout settings; ``client`` and ``server`` read their own environment variables."""

    model_config = _config("OSMOSIS_ROLLOUT_")

    client: RolloutClientSettings = Field(default_factory=RolloutClientSettings)
    server: RolloutServerSettings = Field(default_factory=RolloutServerSettings)
    max_metadata_size_bytes: int = Field(default=DEFAULT_MAX_METADATA_SIZE_BYTES, ge=1024, le=104857600)


_lock = threading.Lock()
_settings: RolloutSettings | None = None


def get_settings() -> RolloutSettings:
    """Return the process-wide settings, created from the environment on first use."""
    global _settings
    current = _settings
    if current is not None:
        return current
    with _lock:
        if _settings is None:
            try:
                _settings = RolloutSettings()
            except ValidationError as exc:
                raise RolloutValueError(describe_invalid_setting(exc)) from None
            _adopt_metadata_limit_default(_settings.max_metadata_size_bytes)
        return _settings


_GROUPS: dict[str, type[BaseModel]] = {
    "RolloutClientSettings": RolloutClientSettings,
    "RolloutServerSettings": RolloutServerSettings,
    "RolloutSettings": RolloutSettings,
}


def _allowed(model: type[BaseModel], name: str) -> str:
    field = model.model_fields.get(name)
    if field is None:
        return ""
    low = high = None
    for constraint in field.metadata:
        low = getattr(constraint, "ge", getattr(constraint, "gt", low))
        high = getattr(constraint, "le", getattr(constraint, "lt", high))
    kind = getattr(field.annotation, "__name__", str(field.annotation))
    if low is not None and high is not None:
        return f"; allowed: {kind} from {low} to {high}"
    if low is not None:
        return f"; allowed: {kind} >= {low}"
    return f"; allowed: {kind}"


def describe_invalid_setting(exc: ValidationError) -> str:
    """One line naming the environment variable, its value, what is wrong and the allowed range."""
    model = _GROUPS.get(exc.title, RolloutSettings)
    prefix = str(model.model_config.get("env_prefix", ""))
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "?"
    value = error.get("input")
    return f"{prefix}{name.upper()}={value!r:.80}: {error['msg']}{_allowed(model, name)}" + (
        f" ({len(exc.errors()) - 1} more invalid settings)" if len(exc.errors()) > 1 else ""
    )


def configure(settings: RolloutSettings) -> None:
    """Replace the process-wide settings (and apply their metadata size limit)."""
    global _settings
    with _lock:
        _settings = settings
        set_max_metadata_size_bytes(settings.max_metadata_size_bytes)


def reset_settings() -> None:
    """Forget the process-wide settings; the next ``get_settings()`` reads the environment again."""
    global _settings
    with _lock:
        _settings = None
        _reset_metadata_limit()
