"""OsmosisLLMClient against the real trainer stand-in over HTTP: bodies, headers, retries, errors, metrics."""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

import pytest
from pydantic import ValidationError

from osmosis_ai.rollout import client as client_module
from osmosis_ai.rollout.client import CompletionsResult, OsmosisLLMClient
from osmosis_ai.rollout.config import RolloutClientSettings
from osmosis_ai.rollout.core.exceptions import (
    OsmosisServerError,
    OsmosisTimeoutError,
    OsmosisTransportError,
    OsmosisValidationError,
    RolloutValueError,
)
from osmosis_ai.rollout.core.schemas import RolloutMetrics, RolloutStatus
from tests.support.sockets import free_port
from tests.support.trainer import FINAL_MESSAGE, Reply, TrainerStandIn, completion

USER = [{"role": "user", "content": "What is 1 + 2?"}]
FAST = RolloutClientSettings(
    retry_base_delay=0.1, retry_max_delay=1.0, max_retries=3, complete_rollout_retries=2
)


def _client(trainer: TrainerStandIn, **kwargs: Any) -> OsmosisLLMClient:
    kwargs.setdefault("settings", FAST)
    return OsmosisLLMClient(trainer.url, "r-1", **kwargs)


def _planned_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The back-off before each retry, as the client logs it ("retrying in 0.30s")."""
    return [float(m) for m in re.findall(r"retrying in (\d+\.\d+)s", caplog.text)]


# -- request shape ------------------------------------------------------------------------------------


async def test_chat_body_headers_and_result(trainer: TrainerStandIn) -> None:
    client = OsmosisLLMClient(trainer.url + "//", "r-1", api_key="tg-secret", settings=FAST)
    assert client.server_url == trainer.url
    result = await client.chat_completions(USER, temperature=0.7, max_tokens=64)
    (request,) = trainer.requests
    assert request.path == "/v1/chat/completions"
    assert list(request.json) == [
        "model",
        "messages",
        "rollout_id",
        "temperature",
        "top_p",
        "max_tokens",
        "logprobs",
    ]
    assert request.json == {
        "model": "default",
        "messages": USER,
        "rollout_id": "r-1",
        "temperature": 0.7,
        "top_p": 1.0,
        "max_tokens": 64,
        "logprobs": True,
    }
    assert request.headers["content-type"] == "application/json"
    assert request.headers["authorization"] == "Bearer tg-secret"
    assert "x-api-key" not in request.headers
    assert result.message == {"role": "assistant", "content": "The answer is #### 3"}
    assert (result.content, result.finish_reason, result.has_tool_calls, result.tool_calls) == (
        "The answer is #### 3",
        "stop",
        False,
        [],
    )
    assert result.token_ids == list(range(8))
    assert result.logprobs == [-0.5] * 8
    assert result.usage == {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}


@pytest.mark.parametrize("api_key", [None, ""])
async def test_no_authorization_header_without_api_key(trainer: TrainerStandIn, api_key: str | None) -> None:
    await _client(trainer, api_key=api_key).chat_completions(USER)
    assert "authorization" not in trainer.requests[0].headers


@pytest.mark.parametrize(
    ("stop", "sent"),
    [(None, None), ("###", ["###"]), (["a", 3], ["a", "3"]), (("a",), None)],
)
async def test_stop_is_normalized_and_omitted_when_none(
    trainer: TrainerStandIn, stop: Any, sent: Any
) -> None:
    await _client(trainer).chat_completions(USER, stop=stop)
    body = trainer.requests[0].json
    assert body.get("stop") == sent
    assert ("stop" in body) == (sent is not None)
    assert list(body)[-1] == "logprobs"


async def test_unusual_argument_types_are_validated_like_the_schema(trainer: TrainerStandIn) -> None:
    await _client(trainer).chat_completions(USER, temperature="0.5", max_tokens=10.0, logprobs=0)  # type: ignore[arg-type]
    body = trainer.requests[0].json
    assert (body["temperature"], body["max_tokens"], body["logprobs"]) == (0.5, 10, False)
    with pytest.raises(RolloutValueError) as exc:  # a ValueError, as pydantic's error was in 0.2
        await _client(trainer).chat_completions(["not a message"])  # type: ignore[list-item]
    assert isinstance(exc.value, ValueError) and isinstance(exc.value.__cause__, ValidationError)
    assert len(trainer.requests) == 1


async def test_non_json_messages_fail_before_sending(trainer: TrainerStandIn) -> None:
    with pytest.raises(RolloutValueError, match="not valid JSON"):
        await _client(trainer).chat_completions([{"role": "user", "content": object()}])
    assert trainer.requests == []


async def test_unknown_kwargs_are_dropped_with_one_warning_per_name(
    trainer: TrainerStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="osmosis_ai.rollout.client")
    client = _client(trainer)
    await client.chat_completions(USER, model="policy-7", tools=[{"type": "function"}], seed_test_only=1)
    await client.chat_completions(USER, tools=[], seed_test_only=2)
    body = trainer.requests[0].json
    assert body["model"] == "policy-7"
    assert "tools" not in body and "seed_test_only" not in body
    warnings = [r.getMessage() for r in caplog.records if "drops the keyword argument" in r.getMessage()]
    assert len([w for w in warnings if "'tools'" in w]) <= 1
    assert len([w for w in warnings if "'seed_test_only'" in w]) == 1
    tools_warnings = [w for w in warnings if "'tools'" in w]
    if tools_warnings:  # another test in this process may have warned about 'tools' first
        assert "init response" in tools_warnings[0]


async def test_idempotency_key_is_stable_across_retries_and_new_per_call(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(Reply(status=500))
    client = _client(trainer)
    await client.chat_completions(USER)
    await client.chat_completions(USER)
    keys = [r.headers["idempotency-key"] for r in trainer.requests]
    assert keys[0] == keys[1] != keys[2]


# -- retries and errors -------------------------------------------------------------------------------


async def test_5xx_is_retried_with_jittered_exponential_backoff(
    trainer: TrainerStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    trainer.queue_chat(Reply(status=500), Reply(status=502), Reply(status=503))
    with caplog.at_level(logging.WARNING, logger="osmosis_ai.rollout.client"):
        result = await _client(trainer).chat_completions(USER)
    assert result.content == "The answer is #### 3"
    assert [r.status for r in trainer.requests] == [500, 502, 503, 200]
    waits = _planned_waits(caplog)
    for wait, full in zip(waits, [0.1, 0.2, 0.4], strict=True):
        assert full / 2 - 0.005 <= wait <= full + 0.005  # the upper half of each doubling ceiling


async def test_5xx_exhausting_retries_raises_server_error(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(*[Reply(status=503, body={"detail": "overloaded"})] * 3)
    with pytest.raises(OsmosisServerError, match="overloaded") as exc:
        await _client(trainer, max_retries=2).chat_completions(USER)
    assert exc.value.status_code == 503
    assert len(trainer.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_other_4xx_fail_at_once(trainer: TrainerStandIn, status: int) -> None:
    trainer.queue_chat(Reply(status=status, body={"detail": "bad request body"}))
    with pytest.raises(OsmosisValidationError, match="bad request body") as exc:
        await _client(trainer).chat_completions(USER)
    assert exc.value.status_code == status
    assert len(trainer.requests) == 1


@pytest.mark.parametrize("status", [408, 429])
async def test_408_and_429_are_retried_honouring_retry_after(
    trainer: TrainerStandIn, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    trainer.queue_chat(Reply(status=status, headers={"Retry-After": "0.3"}))
    with caplog.at_level(logging.WARNING, logger="osmosis_ai.rollout.client"):
        await _client(trainer).chat_completions(USER)
    assert [r.status for r in trainer.requests] == [status, 200]
    assert _planned_waits(caplog) == [0.3]  # longer than the 0.1 s back-off, so the server's wait wins


async def test_retry_after_is_capped_by_retry_max_delay(
    trainer: TrainerStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    trainer.queue_chat(Reply(status=429, headers={"Retry-After": "120"}))
    with caplog.at_level(logging.WARNING, logger="osmosis_ai.rollout.client"):
        await _client(trainer).chat_completions(USER)
    assert [r.status for r in trainer.requests] == [429, 200]
    assert _planned_waits(caplog) == [1.0]  # retry_max_delay, not 120 s


async def test_429_exhausted_raises_validation_error(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(*[Reply(status=429, headers={"Retry-After": "0"})] * 2)
    with pytest.raises(OsmosisValidationError) as exc:
        await _client(trainer, max_retries=1).chat_completions(USER)
    assert exc.value.status_code == 429
    assert len(trainer.requests) == 2


@pytest.mark.parametrize("status", [301, 302, 307])
async def test_redirects_are_not_followed(trainer: TrainerStandIn, status: int) -> None:
    trainer.queue_chat(Reply(status=status, headers={"Location": "/elsewhere"}))
    with pytest.raises(OsmosisValidationError, match=f"Unexpected status code {status}"):
        await _client(trainer).chat_completions(USER)
    assert len(trainer.requests) == 1


async def test_any_2xx_with_a_completion_is_success(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(Reply(status=201, body=completion({"role": "assistant", "content": "ok"}, 1)))
    assert (await _client(trainer).chat_completions(USER)).content == "ok"


async def test_timeout_is_retried_then_raised(trainer: TrainerStandIn) -> None:
    trainer.queue_chat(Reply(delay=30.0), Reply(delay=30.0))  # answers far beyond the test's life
    with pytest.raises(OsmosisTimeoutError, match=r"within 0\.3s"):
        await _client(trainer, timeout_seconds=0.3, max_retries=1).chat_completions(USER)
    assert len(trainer.requests) == 2


async def test_refused_connection_is_retried_then_raised(caplog: pytest.LogCaptureFixture) -> None:
    client = OsmosisLLMClient(f"http://127.0.0.1:{free_port()}", "r-1", max_retries=1, settings=FAST)
    with (
        caplog.at_level(logging.WARNING, logger="osmosis_ai.rollout.client"),
        pytest.raises(OsmosisTransportError, match="Connect"),
    ):
        await client.chat_completions(USER)
    assert len(_planned_waits(caplog)) == 1  # one retry, after the back-off
    assert "failed after 2 attempts" in caplog.text


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"<html>bad gateway</html>", "not JSON"),
        ({"id": "x"}, "without choices"),
        ({"choices": []}, "without choices"),
        ({"choices": [{"message": "text"}]}, "without choices"),
        ([1, 2], "without choices"),
        (b"", "not JSON"),
    ],
)
async def test_malformed_2xx_raises_server_error_without_retry(
    trainer: TrainerStandIn, body: Any, match: str
) -> None:
    trainer.queue_chat(Reply(body=body))
    client = _client(trainer)
    with pytest.raises(OsmosisServerError, match=match) as exc:
        await client.chat_completions(USER)
    assert exc.value.status_code == 200
    assert len(trainer.requests) == 1
    assert client.get_metrics().num_llm_calls == 0


async def test_null_fields_become_empty_values(trainer: TrainerStandIn) -> None:
    message = {"role": "assistant", "content": None, "tool_calls": None}
    trainer.queue_chat(
        Reply(
            body={
                "choices": [{"message": message, "finish_reason": None}],
                "usage": None,
                "token_ids": None,
                "logprobs": None,
            }
        )
    )
    client = _client(trainer)
    result = await client.chat_completions(USER)
    assert (result.token_ids, result.logprobs, result.usage, result.finish_reason) == ([], [], {}, "stop")
    assert (result.tool_calls, result.has_tool_calls, result.content) == ([], False, None)
    metrics = client.get_metrics()
    assert (metrics.num_llm_calls, metrics.prompt_tokens, metrics.response_tokens) == (1, 0, 0)


# -- metrics --------------------------------------------------------------------------------------------


class SteppedClock:
    """A ``time`` stand-in for the client module whose clock moves only when the trainer answers."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


async def test_metrics_sum_successful_calls_only(
    trainer: TrainerStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SteppedClock()
    monkeypatch.setattr(client_module, "time", clock)
    answers = iter([(100.0, Reply(status=500)), (0.25, FINAL_MESSAGE), (0.5, FINAL_MESSAGE)])

    def answer(payload: Any) -> Reply | dict[str, Any]:
        took, reply = next(answers)
        clock.now += took  # the failed attempt "takes" 100 s, the two answers 250 ms and 500 ms
        return reply

    trainer.chat_handler = answer
    client = _client(trainer)
    await client.chat_completions(USER)
    await client.chat_completions(
        [*USER, {"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
    )
    metrics = client.get_metrics()
    assert metrics.num_llm_calls == 2
    assert metrics.prompt_tokens == 10 + 30  # the stand-in counts 10 per message; prefixes are re-counted
    assert metrics.response_tokens == 16
    assert metrics.llm_latency_ms == pytest.approx(750.0)  # the failed attempt and the back-off excluded
    assert (metrics.total_latency_ms, metrics.tool_latency_ms, metrics.num_tool_calls) == (0.0, 0.0, 0)


# -- completion callback --------------------------------------------------------------------------------


async def test_complete_rollout_body_leaves_out_nulls(trainer: TrainerStandIn) -> None:
    client = _client(trainer, api_key="k")
    await client.chat_completions(USER)
    await client.complete_rollout("COMPLETED", [*USER], reward=1)
    request = trainer.completed_requests[0]
    assert request.headers["authorization"] == "Bearer k"
    assert list(request.json) == [
        "rollout_id",
        "status",
        "final_messages",
        "finish_reason",
        "reward",
        "metrics",
        "extra_fields",
    ]
    assert request.json["reward"] == 1.0
    assert request.json["metrics"]["num_llm_calls"] == 1
    assert request.json["metrics"]["prompt_tokens"] == 10
    assert request.json["extra_fields"] == {}
    assert trainer.completed["r-1"] == request.json


async def test_complete_rollout_error_with_explicit_metrics(trainer: TrainerStandIn) -> None:
    metrics = RolloutMetrics(total_latency_ms=5.0, num_tool_calls=2)
    await _client(trainer).complete_rollout(
        RolloutStatus.ERROR, [], finish_reason="error", error_message="tool crashed", metrics=metrics
    )
    body = trainer.completed_requests[0].json
    assert body == {
        "rollout_id": "r-1",
        "status": "ERROR",
        "final_messages": [],
        "finish_reason": "error",
        "error_message": "tool crashed",
        "metrics": metrics.model_dump(),
        "extra_fields": {},
    }


async def test_complete_rollout_accepts_metrics_as_a_dict(trainer: TrainerStandIn) -> None:
    await _client(trainer).complete_rollout("COMPLETED", [], metrics={"num_tool_calls": 3})
    assert trainer.completed_requests[0].json["metrics"] == RolloutMetrics(num_tool_calls=3).model_dump()


@pytest.mark.parametrize("kwargs", [{"max_tokens": None}, {"temperature": "hot"}, {"logprobs": "maybe"}])
async def test_unusable_sampling_arguments_are_osmosis_errors(
    trainer: TrainerStandIn, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(RolloutValueError, match="cannot send the chat request"):
        await _client(trainer).chat_completions(USER, **kwargs)
    assert trainer.requests == []


def test_a_callback_key_that_cannot_be_a_header_is_refused_up_front(trainer: TrainerStandIn) -> None:
    with pytest.raises(RolloutValueError, match="control characters"):
        OsmosisLLMClient(trainer.url, "r", api_key="key\nX-Injected: 1", settings=FAST)


async def test_a_rollout_id_keyword_is_a_type_error_as_in_0_2(trainer: TrainerStandIn) -> None:
    with pytest.raises(TypeError, match="rollout_id"):
        await _client(trainer).chat_completions(USER, rollout_id="other")
    assert trainer.requests == []


@pytest.mark.parametrize("status", [200, 202, 204])
async def test_complete_rollout_accepts_any_2xx(trainer: TrainerStandIn, status: int) -> None:
    trainer.queue_completed(Reply(status=status, body=b""))
    await _client(trainer).complete_rollout("COMPLETED", [])
    assert len(trainer.completed_requests) == 1


async def test_complete_rollout_retries_with_its_own_count(trainer: TrainerStandIn) -> None:
    trainer.queue_completed(Reply(status=500), Reply(status=500), Reply(status=500))
    with pytest.raises(OsmosisServerError):
        await _client(trainer, complete_rollout_retries=1).complete_rollout("COMPLETED", [])
    assert len(trainer.completed_requests) == 2
    trainer.queue_completed(Reply(status=503))
    await _client(trainer).complete_rollout("COMPLETED", [])
    assert [r.status for r in trainer.completed_requests][-2:] == [503, 200]


async def test_complete_rollout_4xx_fails_at_once(trainer: TrainerStandIn) -> None:
    trainer.queue_completed(Reply(status=409, body={"detail": "already completed"}))
    with pytest.raises(OsmosisValidationError, match="already completed"):
        await _client(trainer).complete_rollout("COMPLETED", [])
    assert len(trainer.completed_requests) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"status": "DONE"}, "'DONE' is not a valid RolloutStatus"),
        ({"status": "COMPLETED", "reward": "high"}, "reward must be a finite real number .* got 'high'"),
        ({"status": "COMPLETED", "reward": float("nan")}, "reward must be a finite real number .* got nan"),
        ({"status": "COMPLETED", "reward": True}, "got True of type bool; a bool is not a score"),
        ({"status": "COMPLETED", "final_messages": [{"x": object()}]}, "not valid JSON"),
        ({"status": "COMPLETED", "final_messages": None}, "final_messages must be a list of message dicts"),
        ({"status": "COMPLETED", "final_messages": ["hi"]}, "final_messages must be a list of message dicts"),
        ({"status": "COMPLETED", "finish_reason": 5}, "finish_reason must be a string or None"),
        ({"status": "ERROR", "error_message": ["boom"]}, "error_message must be a string or None"),
        ({"status": "COMPLETED", "metrics": {"num_llm_calls": "many"}}, "metrics must be RolloutMetrics"),
    ],
)
async def test_invalid_completion_values_fail_before_sending(
    trainer: TrainerStandIn, kwargs: dict[str, Any], match: str
) -> None:
    kwargs.setdefault("final_messages", [])
    with pytest.raises(ValueError, match=match) as exc:
        await _client(trainer).complete_rollout(**kwargs)
    assert isinstance(exc.value, RolloutValueError)
    assert trainer.requests == []


# -- lifecycle and helpers --------------------------------------------------------------------------


async def test_settings_and_overrides(trainer: TrainerStandIn) -> None:
    client = OsmosisLLMClient(
        trainer.url, "r", timeout_seconds=7, max_retries=0, complete_rollout_retries=0, settings=FAST
    )
    assert (client.timeout_seconds, client.max_retries, client.complete_rollout_retries) == (7, 0, 0)
    defaults = OsmosisLLMClient(trainer.url, "r", settings=FAST)
    assert (defaults.timeout_seconds, defaults.max_retries, defaults.complete_rollout_retries) == (
        300.0,
        3,
        2,
    )


async def test_closing_a_client_keeps_the_shared_pool_usable(trainer: TrainerStandIn) -> None:
    async with _client(trainer) as first:
        await first.chat_completions(USER)
    await first.close()
    async with _client(trainer) as second:
        await second.chat_completions(USER)
    await first.chat_completions(USER)  # still works after close, as in 0.2
    assert len(trainer.requests) == 3


def test_completions_result_properties() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    result = CompletionsResult({"role": "assistant", "tool_calls": [call]}, [], [], {}, "tool_calls")
    assert result.has_tool_calls and result.tool_calls == [call] and result.content is None
    with pytest.raises(AttributeError):
        result.message = {}  # type: ignore[misc]


def test_result_is_json_friendly() -> None:
    result = CompletionsResult(
        {"role": "assistant", "content": "x"}, [1], [-0.1], {"prompt_tokens": 1}, "stop"
    )
    assert json.loads(json.dumps(result.message)) == {"role": "assistant", "content": "x"}


async def test_trainer_error_bodies_are_redacted_before_they_are_logged_or_raised(
    trainer: TrainerStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    key = "tg-callback-key-0123456789abcdef"
    echo = {"detail": f"key {key[:12]} is not valid", "token": "sk-live-abcdefghijklmnopqrstuvwxyz0123"}
    trainer.queue_completed(Reply(status=403, body=echo))
    client = OsmosisLLMClient(trainer.url, "r-redact", api_key=key)
    with caplog.at_level(logging.DEBUG), pytest.raises(OsmosisValidationError) as caught:
        await client.complete_rollout("COMPLETED", [])
    shown = str(caught.value) + caplog.text
    assert "[redacted]" in shown
    for secret in (key, key[:12], "sk-live-abcdefghijklmnopqrstuvwxyz0123"):
        assert secret not in shown


async def test_send_completion_retries_for_a_window_and_honours_retry_after(
    trainer: TrainerStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    waits: list[float] = []  # every asyncio.sleep of the test's loop (the stand-in's too), waited for real
    real_sleep = asyncio.sleep

    async def recorded_sleep(seconds: float, result: Any = None) -> Any:
        waits.append(seconds)
        return await real_sleep(seconds, result)

    monkeypatch.setattr(asyncio, "sleep", recorded_sleep)
    trainer.queue_completed(
        Reply(status=503), Reply(status=429, headers={"Retry-After": "0.3"}), Reply(status=502)
    )
    client = OsmosisLLMClient(trainer.url, "r-window", settings=FAST)
    body = client.encode_completion("COMPLETED", [], reward=1.0)
    await client.send_completion(body, window_seconds=30)
    assert 0.3 in waits  # the 429's Retry-After, waited out as given (the back-off waits are jittered)
    assert [r.status for r in trainer.completed_requests] == [503, 429, 502, 200]
    trainer.queue_completed(*[Reply(status=503)] * 50)
    with pytest.raises(OsmosisServerError):
        await client.send_completion(body, window_seconds=0.5)  # the window ends the attempts
