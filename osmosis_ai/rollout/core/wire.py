"""The JSON bodies of the rollout protocol, built from plain Python values without a model instance.

The server and the local TrainGate send these bodies once or several times per rollout, with
conversations of any length; constructing the pydantic model first would validate every message
again only to dump it unchanged. Each builder here returns exactly what the matching model in
``schemas`` dumps for the same values (``tests/rollout/core/test_wire.py`` checks it over generated
inputs), so a field change in ``schemas`` that is not repeated here fails that test.

Builders take values that are already valid for their model; :func:`completions_request` checks the
types of its scalars itself and hands anything unusual to the model.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from osmosis_ai.rollout.core.schemas import CompletionsRequest, OpenAIFunctionToolSchema

if TYPE_CHECKING:
    from pydantic import TypeAdapter

# One encoder for the process: json.dumps() builds a new encoder per call when given options.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_tools_adapter: TypeAdapter[list[OpenAIFunctionToolSchema]] | None = None


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON; ``ValueError`` for NaN or infinity, ``TypeError`` for non-JSON values."""
    return _ENCODER.encode(payload).encode()


def _is_number(value: Any) -> bool:
    return type(value) is float or type(value) is int


def completions_request(
    *,
    rollout_id: str,
    messages: Any,
    model: Any = "default",
    temperature: Any = 1.0,
    top_p: Any = 1.0,
    max_tokens: Any = 512,
    stop: list[str] | None = None,
    logprobs: Any = True,
) -> dict[str, Any]:
    """``CompletionsRequest(...).model_dump(mode="json", exclude_none=True)``.

    Raises ``pydantic.ValidationError`` for values the model rejects.
    """
    if (
        type(model) is str
        and _is_number(temperature)
        and _is_number(top_p)
        and type(max_tokens) is int
        and type(logprobs) is bool
        and type(messages) is list
        and all(type(message) is dict for message in messages)
        and type(rollout_id) is str
        and 0 < len(rollout_id) <= 256
        and not rollout_id.isspace()
    ):
        payload: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "rollout_id": rollout_id,
            "temperature": float(temperature),
            "top_p": float(top_p),
            "max_tokens": max_tokens,
        }
        if stop is not None:
            payload["stop"] = stop
        payload["logprobs"] = logprobs
        return payload
    request = CompletionsRequest(
        model=model,
        messages=messages,
        rollout_id=rollout_id,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop=stop,
        logprobs=logprobs,
    )
    return request.model_dump(mode="json", exclude_none=True)


def rollout_response(
    *,
    rollout_id: str,
    status: str,
    final_messages: list[dict[str, Any]],
    finish_reason: str | None,
    error_message: str | None,
    reward: float | None,
    metrics: dict[str, Any],
) -> dict[str, Any]:
    """``RolloutResponse(...).model_dump(mode="json", exclude_none=True)`` with ``extra_fields`` empty.

    ``status`` is a ``RolloutStatus`` value, ``reward`` a float, ``metrics`` a ``RolloutMetrics`` dump.
    """
    payload: dict[str, Any] = {"rollout_id": rollout_id, "status": status, "final_messages": final_messages}
    if finish_reason is not None:
        payload["finish_reason"] = finish_reason
    if error_message is not None:
        payload["error_message"] = error_message
    if reward is not None:
        payload["reward"] = reward
    payload["metrics"] = metrics
    payload["extra_fields"] = {}
    return payload


def tools_json(tools: Any, *, exclude_none: bool = False) -> bytes:
    """The JSON array of ``list[OpenAIFunctionToolSchema]`` for ``tools`` (models or dicts).

    Raises ``pydantic.ValidationError`` when an item is not a valid tool schema.
    """
    global _tools_adapter
    if _tools_adapter is None:
        from pydantic import TypeAdapter

        _tools_adapter = TypeAdapter(list[OpenAIFunctionToolSchema])
    adapter = _tools_adapter
    return adapter.dump_json(adapter.validate_python(tools), exclude_none=exclude_none)


def init_response(rollout_id: str, tools: bytes) -> bytes:
    """The ``InitResponse`` JSON from the rollout id and the tools array made by :func:`tools_json`."""
    return b'{"rollout_id":%s,"tools":%s}' % (dumps(rollout_id), tools)


def completions_response(
    *,
    id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    finish_reason: str,
    usage: dict[str, int],
    token_ids: list[int] | None,
    logprobs: list[float] | None,
    prompt_token_ids: list[int] | None,
) -> dict[str, Any]:
    """``CompletionsResponse(...).model_dump(mode="json")`` with one choice and full ``usage``."""
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
        },
        "token_ids": token_ids,
        "logprobs": logprobs,
        "prompt_token_ids": prompt_token_ids,
    }
