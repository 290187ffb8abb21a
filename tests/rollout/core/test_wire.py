"""Every builder in ``wire`` produces the JSON its pydantic model dumps, over generated inputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from osmosis_ai.rollout.core import wire
from osmosis_ai.rollout.core.schemas import (
    CompletionsRequest,
    CompletionsResponse,
    InitResponse,
    RolloutMetrics,
    RolloutResponse,
    RolloutStatus,
)

FINITE = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | FINITE | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)
MESSAGES = st.lists(st.dictionaries(TEXT, JSON_VALUES, max_size=4), max_size=4)
ROLLOUT_IDS = st.text(min_size=1, max_size=40).filter(lambda value: value.strip())


def same_json(ours: bytes | str | dict[str, Any], model_json: str) -> None:
    """Equal as parsed JSON, with types (``1`` vs ``1.0``) and key order compared too."""
    if isinstance(ours, dict):
        ours = wire.dumps(ours)
    assert json.dumps(json.loads(ours)) == json.dumps(json.loads(model_json))


@settings(max_examples=300, deadline=None)
@given(
    rollout_id=ROLLOUT_IDS,
    messages=MESSAGES,
    model=TEXT,
    temperature=FINITE | st.integers(-100, 100),
    top_p=FINITE | st.integers(-100, 100),
    max_tokens=st.integers(-(2**40), 2**40),
    stop=st.none() | st.lists(TEXT, max_size=3),
    logprobs=st.booleans(),
)
def test_completions_request_matches_the_model(**fields: Any) -> None:
    model = CompletionsRequest(**fields)
    same_json(wire.completions_request(**fields), model.model_dump_json(exclude_none=True))


@settings(max_examples=100, deadline=None)
@given(
    rollout_id=st.text(max_size=300),
    temperature=st.booleans() | st.sampled_from(["0.5", "1"]) | FINITE,
    max_tokens=st.booleans() | st.sampled_from(["7", 3.0]) | st.integers(0, 10),
    logprobs=st.booleans() | st.sampled_from([0, 1, "yes"]),
)
def test_completions_request_defers_unusual_values_to_the_model(**fields: Any) -> None:
    fields["messages"] = [{"role": "user", "content": "hi"}]
    try:
        expected = CompletionsRequest(**fields).model_dump_json(exclude_none=True)
    except ValidationError:
        with pytest.raises(ValidationError):
            wire.completions_request(**fields)
        return
    same_json(wire.completions_request(**fields), expected)


METRICS = st.builds(
    RolloutMetrics,
    total_latency_ms=FINITE,
    llm_latency_ms=FINITE,
    tool_latency_ms=FINITE,
    num_llm_calls=st.integers(0, 2**40),
    num_tool_calls=st.integers(0, 2**40),
    prompt_tokens=st.integers(0, 2**40),
    response_tokens=st.integers(0, 2**40),
    max_context_tokens=st.integers(0, 2**40),
)


@settings(max_examples=300, deadline=None)
@given(
    rollout_id=TEXT,
    status=st.sampled_from(RolloutStatus),
    final_messages=MESSAGES,
    finish_reason=st.none() | TEXT,
    error_message=st.none() | TEXT,
    reward=st.none() | FINITE,
    metrics=METRICS,
)
def test_rollout_response_matches_the_model(
    status: RolloutStatus, metrics: RolloutMetrics, **fields: Any
) -> None:
    model = RolloutResponse(status=status, metrics=metrics, **fields)
    ours = wire.rollout_response(status=status.value, metrics=metrics.model_dump(), **fields)
    same_json(ours, model.model_dump_json(exclude_none=True))


PROPERTY = st.fixed_dictionaries(
    {"type": TEXT}, optional={"description": st.none() | TEXT, "enum": st.none() | st.lists(TEXT, max_size=3)}
)
TOOL = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": TEXT, "description": TEXT},
            optional={
                "parameters": st.fixed_dictionaries(
                    {
                        "type": st.just("object"),
                        "properties": st.dictionaries(TEXT, PROPERTY, max_size=3),
                        "required": st.lists(TEXT, max_size=3),
                    }
                ),
                "strict": st.booleans(),
            },
        ),
    }
)


@settings(max_examples=200, deadline=None)
@given(rollout_id=TEXT, tools=st.lists(TOOL, max_size=3), exclude_none=st.booleans())
def test_init_response_matches_the_model(
    rollout_id: str, tools: list[dict[str, Any]], exclude_none: bool
) -> None:
    model = InitResponse(rollout_id=rollout_id, tools=tools)
    ours = wire.init_response(rollout_id, wire.tools_json(tools, exclude_none=exclude_none))
    same_json(ours, model.model_dump_json(exclude_none=exclude_none))


def test_tools_json_rejects_what_the_model_rejects() -> None:
    with pytest.raises(ValidationError):
        wire.tools_json([{"type": "function", "function": {"name": "add"}}])  # no description


TOKENS = st.none() | st.lists(st.integers(0, 2**31), max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    id=TEXT,
    created=st.integers(0, 2**40),
    model=TEXT,
    message=st.dictionaries(TEXT, JSON_VALUES, max_size=4),
    finish_reason=TEXT,
    usage=st.fixed_dictionaries(
        {key: st.integers(0, 2**40) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
    ),
    token_ids=TOKENS,
    logprobs=st.none() | st.lists(FINITE, max_size=5),
    prompt_token_ids=TOKENS,
)
def test_completions_response_matches_the_model(
    message: dict[str, Any], finish_reason: str, **fields: Any
) -> None:
    model = CompletionsResponse(
        choices=[{"index": 0, "message": message, "finish_reason": finish_reason}], **fields
    )
    ours = wire.completions_response(message=message, finish_reason=finish_reason, **fields)
    same_json(ours, model.model_dump_json())


def test_dumps_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(ValueError):
        wire.dumps({"x": float("nan")})
    with pytest.raises(TypeError):
        wire.dumps({"x": object()})
    assert wire.dumps({"é": [1, 2.5, None]}) == '{"é":[1,2.5,null]}'.encode()
