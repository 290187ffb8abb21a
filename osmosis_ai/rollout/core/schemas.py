"""Wire schemas of the remote-rollout protocol (pydantic v2), shared by the server and the client.

Field names, defaults, declaration order and the validation texts that show up in 422 bodies are part
of the wire contract with TrainGate and must not change. Unknown input keys are ignored (pydantic's
default), so TrainGate may add fields without breaking older servers. The SDK builds every body it
sends with these models' own serializer, the one encoding of the wire format (it is also faster than
a hand-built dict passed to ``json.dumps``).

The metadata size limit is process-wide: ``get_max_metadata_size_bytes()`` /
``set_max_metadata_size_bytes()``. Until it is set explicitly it comes from the environment variable
``OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES`` (the same variable ``RolloutSettings`` reads), else 1 MiB.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from enum import Enum
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from osmosis_ai.rollout.core.exceptions import RolloutValueError

logger = logging.getLogger(__name__)

MessageDict = dict[str, Any]
"""One OpenAI-style chat message (``role``, ``content``, maybe ``tool_calls`` / ``tool_call_id``)."""

SamplingParamsDict = dict[str, Any]
"""Free-form sampling parameters (``temperature``, ``top_p``, ``max_tokens``, ``stop``, ...)."""

DEFAULT_MAX_METADATA_SIZE_BYTES = 1048576
METADATA_SIZE_ENV_VAR = "OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES"
_MIB = 1024 * 1024
_METADATA_SIZE_RANGE = (1024, 104857600)  # the range RolloutSettings enforces for the same value

_metadata_lock = threading.Lock()
_max_metadata_size_bytes: int | None = None  # None: not resolved yet (environment or default on first use)


def _limit_from_environment() -> int:
    raw = os.environ.get(METADATA_SIZE_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_MAX_METADATA_SIZE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    low, high = _METADATA_SIZE_RANGE
    if not low <= value <= high:
        logger.warning(
            "Ignoring %s=%r: expected an integer between %d and %d; using %d bytes",
            METADATA_SIZE_ENV_VAR,
            raw,
            low,
            high,
            DEFAULT_MAX_METADATA_SIZE_BYTES,
        )
        return DEFAULT_MAX_METADATA_SIZE_BYTES
    return value


def get_max_metadata_size_bytes() -> int:
    """Return the process-wide limit on ``json.dumps(RolloutRequest.metadata)`` in UTF-8 bytes."""
    global _max_metadata_size_bytes
    limit = _max_metadata_size_bytes
    if limit is not None:
        return limit
    with _metadata_lock:
        if _max_metadata_size_bytes is None:
            _max_metadata_size_bytes = _limit_from_environment()
        return _max_metadata_size_bytes


def set_max_metadata_size_bytes(size_bytes: int) -> None:
    """Set the process-wide metadata limit in bytes. ``RolloutValueError`` (a ``ValueError``) unless a positive int."""
    global _max_metadata_size_bytes
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int):
        raise RolloutValueError(f"max metadata size must be an integer number of bytes, got {size_bytes!r}")
    if size_bytes <= 0:
        raise RolloutValueError(f"max metadata size must be positive, got {size_bytes} bytes")
    with _metadata_lock:
        _max_metadata_size_bytes = size_bytes


def _adopt_metadata_limit_default(size_bytes: int) -> None:
    """Use ``size_bytes`` unless the limit was already resolved or set (called by ``get_settings()``)."""
    global _max_metadata_size_bytes
    with _metadata_lock:
        if _max_metadata_size_bytes is None:
            _max_metadata_size_bytes = size_bytes


def _reset_metadata_limit() -> None:
    """Forget the resolved limit, so the next use reads the environment again (tests, ``reset_settings``)."""
    global _max_metadata_size_bytes
    with _metadata_lock:
        _max_metadata_size_bytes = None


def format_size_limit(limit: int) -> str:
    """``1MB`` for whole mebibytes (the protocol's wording); otherwise an exact byte count plus the fraction of a MB."""
    if limit % _MIB == 0:
        return f"{limit // _MIB}MB"
    return f"{limit} bytes ({limit / _MIB:.3g}MB)"


def _check_rollout_id(value: str) -> str:
    if not value.strip():
        raise ValueError("rollout_id cannot be empty or whitespace only")
    return value


# --------------------------------------------------------------------------- tool definitions (2.1)


class OpenAIFunctionPropertySchema(BaseModel):
    """One parameter of a function tool.

    ``type`` is required and ``description`` and ``enum`` are always serialized (``null`` when unset),
    the protocol's tool shape. Every other JSON-Schema keyword (nested ``properties``, ``items``,
    ``anyOf``, ``default``, ...) is kept verbatim and serialized after them: the model needs the nested
    shape to fill nested arguments, and strict providers reject a schema with it cut away.
    """

    model_config = ConfigDict(extra="allow")

    type: str
    description: str | None = None
    enum: list[Any] | None = None


class OpenAIFunctionParametersSchema(BaseModel):
    """The ``parameters`` object of a function tool; other keywords (``$defs``, ``additionalProperties``,
    ...) are kept verbatim, as in a property."""

    model_config = ConfigDict(extra="allow")

    type: str
    properties: dict[str, OpenAIFunctionPropertySchema]
    required: list[str]


def _empty_parameters() -> OpenAIFunctionParametersSchema:
    return OpenAIFunctionParametersSchema(type="object", properties={}, required=[])


class OpenAIFunctionSchema(BaseModel):
    """A function's name, description (required) and parameters."""

    name: str
    description: str
    parameters: OpenAIFunctionParametersSchema = Field(default_factory=_empty_parameters)
    strict: bool = False


class OpenAIFunctionToolSchema(BaseModel):
    """A tool in OpenAI function-calling shape, as returned to TrainGate in the init response.

    To send tools to an LLM API yourself, prefer ``tool.model_dump(exclude_none=True)``.
    """

    type: str
    function: OpenAIFunctionSchema


# --------------------------------------------------------------------------- tool-call helpers (2.2)


class OpenAIFunctionParsedSchema(BaseModel):
    """A function call as the model produced it: arguments are raw JSON text."""

    name: str
    arguments: str


class OpenAIFunctionCallSchema(BaseModel):
    """A function call with decoded arguments."""

    name: str
    arguments: dict[str, Any]

    @staticmethod
    def from_openai_function_parsed_schema(
        parsed_schema: OpenAIFunctionParsedSchema,
    ) -> tuple[OpenAIFunctionCallSchema, bool]:
        """Decode ``parsed_schema.arguments``; returns the call and whether decoding failed.

        Undecodable JSON or a non-object value gives ``arguments={}`` and ``True``.
        """
        name = parsed_schema.name
        try:
            arguments = json.loads(parsed_schema.arguments)
        except (json.JSONDecodeError, TypeError):
            return OpenAIFunctionCallSchema(name=name, arguments={}), True
        if not isinstance(arguments, dict):
            return OpenAIFunctionCallSchema(name=name, arguments={}), True
        return OpenAIFunctionCallSchema(name=name, arguments=arguments), False


class OpenAIFunctionToolCall(BaseModel):
    """A tool call with decoded arguments."""

    id: str
    type: Literal["function"] = "function"
    function: OpenAIFunctionCallSchema


class ToolResponse(BaseModel):
    """A tool's output: text and/or lists of images/videos."""

    text: str | None = None
    image: list[Any] | None = None
    video: list[Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def validate_media_fields(cls, values: Any) -> Any:
        """``values`` unchanged, or ``ValueError`` when ``image`` or ``video`` is given and not a list."""
        if not isinstance(values, dict):
            return values
        for name in ("image", "video"):
            value = values.get(name)
            if value is not None and not isinstance(value, list):
                raise ValueError(
                    f"{name} must be a list or None, got {type(value).__name__}; "
                    f"wrap a single item in a list: {name}=[item]"
                )
        return values

    def is_empty(self) -> bool:
        """True when there is no text, image or video."""
        return not (self.text or self.image or self.video)

    def is_text_only(self) -> bool:
        """True when there is text and neither image nor video."""
        return bool(self.text) and not self.image and not self.video


# --------------------------------------------------------------------------- rollout lifecycle (2.3-2.7)


class RolloutStatus(str, Enum):
    """Terminal status of a rollout, as posted to ``/v1/rollout/completed``."""

    COMPLETED = "COMPLETED"
    ERROR = "ERROR"


class RolloutMetrics(BaseModel):
    """Per-rollout counters reported with the final response."""

    total_latency_ms: float = 0.0
    llm_latency_ms: float = 0.0
    tool_latency_ms: float = 0.0
    num_llm_calls: int = 0
    num_tool_calls: int = 0
    prompt_tokens: int = 0
    response_tokens: int = 0
    max_context_tokens: int = 0


class RolloutRequest(BaseModel):
    """Body of ``POST /v1/rollout/init``: one rollout to run, and where to call back."""

    rollout_id: str = Field(min_length=1, max_length=256)
    server_url: str
    messages: list[MessageDict]
    completion_params: SamplingParamsDict
    tool_server_url: str | None = None
    max_turns: int = 10
    max_tokens_total: int = 8192
    metadata: dict[str, Any] = Field(default_factory=dict)
    api_key: str | None = None
    idempotency_key: str | None = None

    @field_validator("rollout_id")
    @classmethod
    def validate_rollout_id_format(cls, v: str) -> str:
        """``v`` unchanged, or ``ValueError`` when it is blank."""
        return _check_rollout_id(v)

    @field_validator("server_url")
    @classmethod
    def validate_server_url_format(cls, v: str) -> str:
        """``v`` unchanged, or ``ValueError`` unless it is an http(s) URL with a host."""
        parsed = urlsplit(v)
        if parsed.scheme not in ("http", "https"):
            raise ValueError("server_url must use http or https scheme")
        if not parsed.netloc:
            raise ValueError("server_url must have a valid host")
        return v

    @field_validator("api_key")
    @classmethod
    def _api_key_fits_a_header(cls, value: str | None) -> str | None:
        return check_header_safe_key(value)

    @field_validator("metadata")
    @classmethod
    def _metadata_within_limit(cls, value: dict[str, Any]) -> dict[str, Any]:
        # A field validator, so that a 422 names the field and echoes only the metadata.
        _check_metadata_size(value)
        return value

    def validate_metadata_size(self) -> RolloutRequest:
        """This request, or ``ValueError`` when its metadata is not JSON or exceeds the configured size."""
        _check_metadata_size(self.metadata)
        return self


def _check_metadata_size(metadata: dict[str, Any]) -> None:
    if not metadata:
        return
    try:
        encoded = json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata must be JSON serializable: {exc}") from exc
    limit = get_max_metadata_size_bytes()
    # json.dumps escapes non-ASCII by default, so the text length is the UTF-8 byte count.
    if len(encoded) > limit:
        raise ValueError(f"metadata size exceeds maximum allowed size of {format_size_limit(limit)}")


def check_header_safe_key(key: str | None) -> str | None:
    """``key`` unchanged, or ``ValueError`` when it cannot travel in an ``Authorization`` header.

    Such a key (control characters, line breaks) could never authenticate a callback; rejecting it
    at init gives TrainGate a 422 instead of a rollout that fails on its first call back.
    """
    if key and not key.isprintable():
        raise ValueError(
            "api_key must not contain control characters (it is sent in an Authorization header)"
        )
    return key


class InitResponse(BaseModel):
    """The 202 body of ``POST /v1/rollout/init``: the rollout id and the tools the agent offers."""

    rollout_id: str
    tools: list[OpenAIFunctionToolSchema] = Field(default_factory=list)


REWARD_ERROR_FIELD = "reward_error"
"""The ``extra_fields`` key of a completion whose agent reported a reward that is not a score: the score
rule's message, sent instead of any ``reward`` (a TrainGate that does not read it sees no reward)."""


class RolloutResponse(BaseModel):
    """Body of ``POST {server_url}/v1/rollout/completed``: the rollout's outcome."""

    rollout_id: str
    status: RolloutStatus
    final_messages: list[MessageDict] = Field(default_factory=list)
    finish_reason: str | None = None
    error_message: str | None = None
    reward: float | None = None
    metrics: RolloutMetrics | None = None
    extra_fields: dict[str, Any] = Field(default_factory=dict)


# --------------------------------------------------------------------------- LLM calls (2.8-2.9)


class CompletionsRequest(BaseModel):
    """Body of ``POST {server_url}/v1/chat/completions``; sent with ``exclude_none``.

    ``OsmosisLLMClient`` sends ``model_dump_json(exclude_none=True)``.
    """

    model: str = "default"
    messages: list[MessageDict]
    rollout_id: str = Field(min_length=1, max_length=256)
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: list[str] | None = None
    logprobs: bool = True
    # A 0.3 workflow (an agent framework) sends its tools with each call; a 0.2 agent declares them
    # once, in its init response, and sends none.
    tools: list[MessageDict] | None = None

    @field_validator("rollout_id")
    @classmethod
    def validate_rollout_id_format(cls, v: str) -> str:
        """``v`` unchanged, or ``ValueError`` when it is blank."""
        return _check_rollout_id(v)


class CompletionsChoice(BaseModel):
    """One choice of a chat completion."""

    index: int = 0
    message: MessageDict
    finish_reason: str = "stop"


class CompletionUsage(BaseModel):
    """Token counts of a chat completion."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class CompletionsResponse(BaseModel):
    """TrainGate's reply to a chat completion, plus its optional token-level fields."""

    id: str
    object: str = "chat.completion"
    created: int
    model: str = "default"
    choices: list[CompletionsChoice]
    usage: CompletionUsage | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
