"""Test helpers for agent loops: a mock TrainGate app and a way to route the SDK's callbacks to it.

* ``create_mock_trainer_app()`` — a FastAPI app that answers ``/v1/chat/completions`` (with a tool call
  for arithmetic questions, then a final answer) and records ``/v1/rollout/completed``.
* ``patch_httpx_for_mock_trainer(client, monkeypatch)`` — routes the two callback paths to that app
  for the duration of a test: every callback of ``OsmosisLLMClient`` (through the client's transport
  seam) and every ``httpx.AsyncClient.post`` to them (for code that posts to TrainGate itself). Both
  go through one async in-process transport, so nothing blocks the event loop, the request's headers
  (``Authorization``) reach the app, and only the exact callback paths are routed.
* ``RolloutCompletionTracker`` — waits for completion callbacks; safe to use across threads.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx
    import pytest
    from fastapi import FastAPI

    from osmosis_ai._http import Response as TransportResponse
    from osmosis_ai._http import Transport

__all__ = [
    "RolloutCompletionTracker",
    "create_mock_trainer_app",
    "fake_prompt_token_ids",
    "fake_token_ids",
    "patch_httpx_for_mock_trainer",
]

CALLBACK_PATHS = ("/v1/chat/completions", "/v1/rollout/completed")
_ARITHMETIC = re.compile(r"\b(calculate|add|sum|plus|subtract|multiply|divide)\b", re.IGNORECASE)
_MOCK_TOOL_CALL = {
    "id": "call_mock_add",
    "type": "function",
    "function": {"name": "add", "arguments": '{"a": 5, "b": 3}'},
}

ToolCallGenerator = Callable[[dict[str, Any]], "list[dict[str, Any]] | None"]


def fake_token_ids(text: str) -> list[int]:
    """One fake token id per character."""
    return list(range(len(text)))


def fake_prompt_token_ids(messages: list[dict[str, Any]]) -> list[int]:
    """Ten fake prompt token ids per message (at least ten)."""
    return list(range(10 * max(1, len(messages))))


@dataclass
class RolloutCompletionTracker:
    """Collects completion payloads; ``wait()`` blocks until one arrives. Thread-safe."""

    event: threading.Event = field(default_factory=threading.Event)
    responses: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def record(self, response: dict[str, Any]) -> None:
        with self._lock:
            self.responses.append(response)
        self.event.set()

    def clear(self) -> None:
        with self._lock:
            self.responses.clear()
        self.event.clear()

    def wait(self, timeout: float = 5.0) -> bool:
        return self.event.wait(timeout)


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _mock_reply(messages: list[dict[str, Any]], generator: ToolCallGenerator | None) -> dict[str, Any]:
    last = messages[-1] if messages else {"role": "user", "content": ""}
    if generator is not None:
        tool_calls = generator(last)
    elif last.get("role") == "user" and _ARITHMETIC.search(_text(last)):
        tool_calls = [dict(_MOCK_TOOL_CALL)]
    else:
        tool_calls = None
    if tool_calls:
        return {
            "role": "assistant",
            "content": "I'll help you with that calculation.",
            "tool_calls": tool_calls,
        }
    if last.get("role") == "tool":
        return {"role": "assistant", "content": "The calculation is complete."}
    return {"role": "assistant", "content": "OK."}


def create_mock_trainer_app(
    tracker: RolloutCompletionTracker | None = None,
    tool_call_generator: ToolCallGenerator | None = None,
) -> FastAPI:
    """A FastAPI "Mock Trainer Server" implementing TrainGate's two callback endpoints (no auth check).

    Raises ``ImportError`` with the install command when FastAPI (the ``server`` extra) is missing.
    """
    from osmosis_ai._lazy import require_optional

    fastapi = require_optional("fastapi", feature_name="create_mock_trainer_app()", install_extra="server")
    from pydantic import ValidationError
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from osmosis_ai.rollout.core.schemas import (
        CompletionsChoice,
        CompletionsRequest,
        CompletionsResponse,
        CompletionUsage,
        RolloutResponse,
    )

    app = fastapi.FastAPI(title="Mock Trainer Server")
    completed: dict[str, dict[str, Any]] = {}

    async def parse(request: Request, model: Any) -> Any:
        try:
            return model.model_validate_json(await request.body())
        except ValidationError as exc:
            return JSONResponse({"detail": json.loads(exc.json(include_url=False))}, status_code=422)

    async def chat_completions(request: Request) -> Any:
        body = await parse(request, CompletionsRequest)
        if isinstance(body, JSONResponse):
            return body
        message = _mock_reply(body.messages, tool_call_generator)
        token_ids = fake_token_ids(_text(message))
        prompt_ids = fake_prompt_token_ids(body.messages)
        response = CompletionsResponse(
            id=body.rollout_id,
            created=int(time.time()),
            model=body.model,
            choices=[CompletionsChoice(index=0, message=message, finish_reason="stop")],
            usage=CompletionUsage(
                prompt_tokens=len(prompt_ids),
                completion_tokens=len(token_ids),
                total_tokens=len(prompt_ids) + len(token_ids),
            ),
            token_ids=token_ids,
            logprobs=[0.0] * len(token_ids),
            prompt_token_ids=prompt_ids,
        )
        return JSONResponse(response.model_dump(mode="json"))

    async def rollout_completed(request: Request) -> Any:
        body = await parse(request, RolloutResponse)
        if isinstance(body, JSONResponse):
            return body
        payload = body.model_dump(mode="json", exclude_none=True)
        completed[body.rollout_id] = payload
        if tracker is not None:
            tracker.record(payload)
        return JSONResponse({"status": "ok"})

    async def get_completed(request: Request) -> Any:
        return JSONResponse(completed.get(request.path_params["rollout_id"], {}))

    async def health(request: Request) -> Any:
        return JSONResponse({"status": "healthy", "service": "mock-trainer"})

    app.add_route("/v1/chat/completions", chat_completions, methods=["POST"])
    app.add_route("/v1/rollout/completed", rollout_completed, methods=["POST"])
    app.add_route("/v1/rollout/completed/{rollout_id}", get_completed, methods=["GET"])
    app.add_route("/health", health, methods=["GET"])
    return app


def _httpx() -> Any:
    """httpx, a test dependency (not one of the SDK's own): its absence says how to install it."""
    from osmosis_ai._lazy import require_optional

    return require_optional("httpx", feature_name="patch_httpx_for_mock_trainer", install_extra="dev")


class _MockTrainerTransport:
    """Sends callback paths to an ASGI app in-process (async) and everything else to ``fallback``."""

    def __init__(self, app: Any, fallback: Transport | None) -> None:
        client_library = _httpx()
        self.client = client_library.AsyncClient(
            transport=client_library.ASGITransport(app=app), base_url="http://mock-trainer"
        )
        self._fallback = fallback

    def _fallback_transport(self) -> Transport:
        if self._fallback is None:
            from osmosis_ai._http import Pool

            self._fallback = Pool()
        return self._fallback

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, connect_timeout: float
    ) -> TransportResponse:
        from osmosis_ai._http import Response as TransportResponse

        path = urlsplit(url).path
        target = next((p for p in CALLBACK_PATHS if path.endswith(p)), None)
        if target is None:
            return await self._fallback_transport().post(url, body, headers, timeout, connect_timeout)
        response = await self.client.post(target, content=body, headers=dict(headers), timeout=timeout)
        return TransportResponse(response.status_code, response.content, response.headers.get("Retry-After"))

    async def aclose(self) -> None:
        await self.client.aclose()
        if self._fallback is not None:
            await self._fallback.aclose()


def patch_httpx_for_mock_trainer(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Route ``OsmosisLLMClient`` callbacks to ``client``'s app (a FastAPI TestClient or an ASGI app).

    Undone automatically when the test ends (``monkeypatch``).
    """
    from osmosis_ai import _http

    client_library = _httpx()
    app = getattr(client, "app", client)
    transport = _MockTrainerTransport(app, _http._override)
    monkeypatch.setattr(_http, "_override", transport)
    original_post = client_library.AsyncClient.post

    async def post(self: httpx.AsyncClient, url: Any, *args: Any, **kwargs: Any) -> httpx.Response:
        path = urlsplit(str(url)).path
        target = next((p for p in CALLBACK_PATHS if path.endswith(p)), None)
        if target is None or self is transport.client:
            return await original_post(self, url, *args, **kwargs)
        return await transport.client.post(target, *args, **kwargs)

    monkeypatch.setattr(client_library.AsyncClient, "post", post)
