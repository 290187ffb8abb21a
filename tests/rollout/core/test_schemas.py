"""Wire schemas: field defaults, 422-visible validation texts, the metadata limit, serialization shapes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from osmosis_ai.rollout.config import RolloutSettings, configure, get_settings, reset_settings
from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.core.schemas import (
    DEFAULT_MAX_METADATA_SIZE_BYTES,
    CompletionsRequest,
    CompletionsResponse,
    InitResponse,
    OpenAIFunctionCallSchema,
    OpenAIFunctionParametersSchema,
    OpenAIFunctionParsedSchema,
    OpenAIFunctionPropertySchema,
    OpenAIFunctionSchema,
    OpenAIFunctionToolSchema,
    RolloutMetrics,
    RolloutRequest,
    RolloutResponse,
    RolloutStatus,
    ToolResponse,
    format_size_limit,
    get_max_metadata_size_bytes,
    set_max_metadata_size_bytes,
)


@pytest.fixture(autouse=True)
def _fresh_limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES", raising=False)
    reset_settings()
    yield
    reset_settings()


def _request(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "rollout_id": "r-1",
        "server_url": "http://127.0.0.1:9",
        "messages": [{"role": "user", "content": "2+3?"}],
        "completion_params": {},
    }
    body.update(overrides)
    return body


def _messages(exc: pytest.ExceptionInfo[ValidationError]) -> list[str]:
    return [error["msg"] for error in exc.value.errors()]


def test_request_defaults_and_ignored_unknown_keys() -> None:
    request = RolloutRequest.model_validate(_request(surprise=1))
    assert request.max_turns == 10
    assert request.max_tokens_total == 8192
    assert request.metadata == {}
    assert (request.api_key, request.idempotency_key, request.tool_server_url) == (None, None, None)
    assert not hasattr(request, "surprise")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rollout_id": "   "}, "Value error, rollout_id cannot be empty or whitespace only"),
        ({"rollout_id": ""}, "String should have at least 1 character"),
        ({"rollout_id": "x" * 257}, "String should have at most 256 characters"),
        ({"server_url": "ftp://host"}, "Value error, server_url must use http or https scheme"),
        ({"server_url": "http://"}, "Value error, server_url must have a valid host"),
        ({"server_url": "localhost:8080"}, "Value error, server_url must use http or https scheme"),
        ({"messages": ["hello"]}, "Input should be a valid dictionary"),
        ({"completion_params": None}, "Input should be a valid dictionary"),
        (
            {"api_key": "k\ney"},
            "Value error, api_key must not contain control characters (it is sent in an Authorization header)",
        ),
    ],
)
def test_request_validation_texts(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        RolloutRequest.model_validate(_request(**overrides))
    assert _messages(exc) == [message]


def test_completion_params_are_required() -> None:
    body = _request()
    del body["completion_params"]
    with pytest.raises(ValidationError) as exc:
        RolloutRequest.model_validate(body)
    assert exc.value.errors()[0]["loc"] == ("completion_params",)


def test_rollout_id_of_256_chars_is_accepted() -> None:
    assert RolloutRequest.model_validate(_request(rollout_id="x" * 256)).rollout_id == "x" * 256


def test_metadata_limit_default_is_one_mebibyte() -> None:
    assert get_max_metadata_size_bytes() == DEFAULT_MAX_METADATA_SIZE_BYTES == 1048576
    fits = {"blob": "x" * (1048576 - len(json.dumps({"blob": ""})))}
    RolloutRequest.model_validate(_request(metadata=fits))
    with pytest.raises(ValidationError) as exc:
        RolloutRequest.model_validate(_request(metadata={"blob": fits["blob"] + "x"}))
    assert _messages(exc) == ["Value error, metadata size exceeds maximum allowed size of 1MB"]


def test_metadata_size_counts_escaped_utf8() -> None:
    set_max_metadata_size_bytes(2048)
    # json.dumps escapes "é" as \u00e9 (6 bytes): 400 of them exceed 2048 bytes
    with pytest.raises(ValidationError):
        RolloutRequest.model_validate(_request(metadata={"t": "é" * 400}))


def test_sub_mebibyte_limit_message_does_not_round_to_zero() -> None:
    set_max_metadata_size_bytes(2000)
    with pytest.raises(ValidationError) as exc:
        RolloutRequest.model_validate(_request(metadata={"blob": "x" * 2000}))
    assert _messages(exc) == [
        "Value error, metadata size exceeds maximum allowed size of 2000 bytes (0.00191MB)"
    ]
    assert format_size_limit(3 * 1048576) == "3MB"


def test_metadata_must_be_json_serializable() -> None:
    with pytest.raises(ValidationError) as exc:
        RolloutRequest.model_validate(_request(metadata={"when": object()}))
    assert _messages(exc)[0].startswith("Value error, metadata must be JSON serializable: ")


def test_empty_metadata_is_never_measured() -> None:
    set_max_metadata_size_bytes(1)
    assert RolloutRequest.model_validate(_request(metadata={})).metadata == {}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (0, "must be positive, got 0 bytes"),
        (-5, "must be positive, got -5 bytes"),
        (1.5, "must be an integer number of bytes, got 1.5"),
        (True, "must be an integer number of bytes, got True"),
        ("10", "must be an integer number of bytes, got '10'"),
    ],
)
def test_set_limit_rejects_non_positive_integers(bad: Any, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        set_max_metadata_size_bytes(bad)
    assert isinstance(exc.value, RolloutValueError)
    assert str(exc.value) == f"max metadata size {message}"


def test_limit_comes_from_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES", "4096")
    reset_settings()
    assert get_max_metadata_size_bytes() == 4096
    with pytest.raises(ValidationError):
        RolloutRequest.model_validate(_request(metadata={"blob": "x" * 5000}))


def test_invalid_environment_value_falls_back_to_default(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES", "tiny")
    reset_settings()
    assert get_max_metadata_size_bytes() == DEFAULT_MAX_METADATA_SIZE_BYTES
    assert "OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES" in caplog.text


def test_configure_applies_settings_limit() -> None:
    configure(RolloutSettings(max_metadata_size_bytes=8192))
    assert get_max_metadata_size_bytes() == 8192


def test_get_settings_adopts_limit_unless_set_explicitly(monkeypatch: pytest.MonkeyPatch) -> None:
    set_max_metadata_size_bytes(3000)
    monkeypatch.setenv("OSMOSIS_ROLLOUT_MAX_METADATA_SIZE_BYTES", "9000")
    assert get_settings().max_metadata_size_bytes == 9000
    assert get_max_metadata_size_bytes() == 3000


def test_limit_is_safe_across_threads() -> None:
    seen: list[int] = []

    def worker(value: int) -> None:
        set_max_metadata_size_bytes(value)
        seen.append(get_max_metadata_size_bytes())

    threads = [threading.Thread(target=worker, args=(1024 * (i + 1),)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8
    assert get_max_metadata_size_bytes() in {1024 * (i + 1) for i in range(8)}


def test_tool_schema_serializes_nulls_and_keeps_every_other_keyword_verbatim() -> None:
    nested = {
        "type": "object",
        "properties": {
            "a": {"type": "number", "minimum": 0},
            "xs": {"type": "array", "items": {"type": "object", "properties": {"k": {"enum": [1, None]}}}},
            "mode": {"type": "integer", "enum": [1, 2], "default": 1, "anyOf": [{"type": "integer"}]},
        },
        "required": ["a"],
        "additionalProperties": False,
        "$defs": {"K": {"type": "string"}},
    }
    tool = OpenAIFunctionToolSchema.model_validate(
        {
            "type": "function",
            "function": {"name": "add", "description": "Add two numbers", "parameters": nested},
        }
    )
    dumped = InitResponse(rollout_id="r-1", tools=[tool]).model_dump(mode="json")
    properties = dumped["tools"][0]["function"]["parameters"].pop("properties")
    assert dumped == {
        "rollout_id": "r-1",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two numbers",
                    "parameters": {
                        "type": "object",
                        "required": ["a"],
                        "additionalProperties": False,
                        "$defs": {"K": {"type": "string"}},
                    },
                    "strict": False,
                },
            }
        ],
    }
    assert properties == {
        "a": {"type": "number", "description": None, "enum": None, "minimum": 0},
        "xs": {
            "type": "array",
            "description": None,
            "enum": None,
            "items": nested["properties"]["xs"]["items"],
        },
        "mode": {
            "type": "integer",
            "description": None,
            "enum": [1, 2],
            "default": 1,
            "anyOf": [{"type": "integer"}],
        },
    }
    assert tool.function.parameters.properties["mode"].enum == [1, 2]


def test_tool_schema_built_from_the_declared_fields_serializes_as_before() -> None:
    tool = OpenAIFunctionToolSchema(
        type="function",
        function=OpenAIFunctionSchema(
            name="pick",
            description="Pick a colour",
            parameters=OpenAIFunctionParametersSchema(
                type="object",
                properties={"colour": OpenAIFunctionPropertySchema(type="string", enum=["red", "blue"])},
                required=["colour"],
            ),
        ),
    )
    assert tool.model_dump(mode="json") == {
        "type": "function",
        "function": {
            "name": "pick",
            "description": "Pick a colour",
            "parameters": {
                "type": "object",
                "properties": {"colour": {"type": "string", "description": None, "enum": ["red", "blue"]}},
                "required": ["colour"],
            },
            "strict": False,
        },
    }


@pytest.mark.parametrize(
    ("function", "missing"),
    [
        ({"name": "f"}, ("function", "description")),
        (
            {"name": "f", "description": "d", "parameters": {"type": "object"}},
            ("function", "parameters", "properties"),
        ),
    ],
)
def test_tool_schema_required_parts(function: dict[str, Any], missing: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as exc:
        OpenAIFunctionToolSchema.model_validate({"type": "function", "function": function})
    assert exc.value.errors()[0]["loc"] == missing


def test_function_default_parameters() -> None:
    tool = OpenAIFunctionToolSchema.model_validate(
        {"type": "function", "function": {"name": "f", "description": ""}}
    )
    assert tool.function.parameters.model_dump() == {"type": "object", "properties": {}, "required": []}
    assert tool.function.strict is False


@pytest.mark.parametrize(
    ("properties", "missing"),
    [
        ({"x": {"enum": ["a"]}}, ("x", "type")),
        ({"x": {"type": 1}}, ("x", "type")),
        ({"x": {"type": "string", "description": 3}}, ("x", "description")),
        ({"x": {"type": "string", "enum": "a"}}, ("x", "enum")),
    ],
)
def test_a_property_still_needs_a_string_type_and_a_string_description(
    properties: dict[str, Any], missing: tuple[str, ...]
) -> None:
    with pytest.raises(ValidationError) as exc:
        OpenAIFunctionToolSchema.model_validate(
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "d",
                    "parameters": {"type": "object", "properties": properties, "required": []},
                },
            }
        )
    assert exc.value.errors()[0]["loc"] == ("function", "parameters", "properties", *missing)


@pytest.mark.parametrize(
    ("arguments", "expected", "failed"),
    [
        ('{"a": 1}', {"a": 1}, False),
        ("not json", {}, True),
        ("[1, 2]", {}, True),
        ("", {}, True),
    ],
)
def test_function_call_decoding(arguments: str, expected: dict[str, Any], failed: bool) -> None:
    call, has_error = OpenAIFunctionCallSchema.from_openai_function_parsed_schema(
        OpenAIFunctionParsedSchema(name="f", arguments=arguments)
    )
    assert (call.name, call.arguments, has_error) == ("f", expected, failed)


def test_tool_response_lists_and_predicates() -> None:
    with pytest.raises(ValidationError, match=r"wrap a single item in a list: image=\[item\]"):
        ToolResponse(image="one.png")  # type: ignore[arg-type]
    assert ToolResponse().is_empty()
    assert ToolResponse(text="hi").is_text_only()
    assert not ToolResponse(text="hi", video=["v"]).is_text_only()
    assert not ToolResponse(image=["i"]).is_empty()


def test_status_values_and_response_defaults() -> None:
    assert [s.value for s in RolloutStatus] == ["COMPLETED", "ERROR"]
    response = RolloutResponse(rollout_id="r", status="ERROR")  # type: ignore[arg-type]
    assert response.model_dump(mode="json", exclude_none=True) == {
        "rollout_id": "r",
        "status": "ERROR",
        "final_messages": [],
        "extra_fields": {},
    }
    assert RolloutMetrics().model_dump() == dict.fromkeys(
        [
            "total_latency_ms",
            "llm_latency_ms",
            "tool_latency_ms",
            "num_llm_calls",
            "num_tool_calls",
            "prompt_tokens",
            "response_tokens",
            "max_context_tokens",
        ],
        0,
    )


def test_completions_request_shape() -> None:
    request = CompletionsRequest(messages=[{"role": "user", "content": "x"}], rollout_id="r")
    assert list(request.model_dump(exclude_none=True)) == [
        "model",
        "messages",
        "rollout_id",
        "temperature",
        "top_p",
        "max_tokens",
        "logprobs",
    ]
    with pytest.raises(ValidationError, match="rollout_id cannot be empty"):
        CompletionsRequest(messages=[], rollout_id=" ")


def test_completions_response_tolerates_token_fields() -> None:
    body = {
        "id": "c",
        "created": 1,
        "choices": [{"message": {"role": "assistant", "content": "x"}}],
        "token_ids": None,
    }
    response = CompletionsResponse.model_validate(body)
    assert response.choices[0].finish_reason == "stop"
    assert response.token_ids is None and response.usage is None
