"""A scriptable OpenAI-compatible chat-completions server for tests and benchmarks.

It serves ``POST /v1/chat/completions`` (and ``POST /chat/completions``) from a real uvicorn server
on a free loopback port, in a background thread, so LiteLLM and any HTTP client exercise their
real code paths. Tests script what the "provider" does and inspect what it received::

    from tests.support.openai_server import OpenAIServer, Reply

    with OpenAIServer() as server:              # started; stopped on exit
        server.queue(Reply(status=429, headers={"retry-after": "0"}))
        server.queue('{"score": 0.7, "explanation": "fine"}')    # a str is the message content
        ...  # call LiteLLM with api_base=server.url ("http://127.0.0.1:<port>/v1"), any api_key
        assert len(server.requests) == 2
        assert server.requests[-1].json["messages"][0]["role"] == "system"

Behaviour:

* Queued replies are served first-in first-out, one per request. When the queue is empty the
  server asks ``handler`` (``Callable[[dict], Reply | str]``, given the request JSON) if set, else
  serves ``default`` (a ``Reply``; by default a valid judge verdict ``{"score": 1.0, ...}``).
* ``Reply(content=..., status=..., headers=..., delay=..., body=...)``: ``content`` becomes the
  assistant message text of an OpenAI ``chat.completion`` object; ``body`` (a dict) replaces the
  whole JSON response instead (errors, logprobs, tool calls, anything); ``status`` >= 400 without
  ``body`` sends an OpenAI-style error object; ``delay`` seconds are waited before answering and
  the wait ends early if the client disconnects (a client timeout does not leave work behind);
  ``gate`` (a ``threading.Event``) holds the answer until the test sets it (at most a minute);
  ``raw`` (bytes) is sent as the body verbatim (malformed JSON, say); ``drop=True`` starts a 200
  answer and closes the connection in the middle of its body.
* ``in_flight``: requests held right now (``in_flight.now``) and the most at once (``in_flight.peak``).
* ``requests`` records every request (``path``, lower-cased ``headers``, parsed ``json``), also for
  unknown paths (answered 404). ``reset()`` clears queue, records, handler and default.
* Thread-safe: tests may queue from any thread while requests are in flight.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.threaded_server import (
    InFlight,
    StandInServer,
    client_left_while_held,
    read_body,
    send_json_bytes,
)

DEFAULT_CONTENT = '{"score": 1.0, "explanation": "default reply from the test server"}'
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass(frozen=True)
class Reply:
    """One scripted answer. See the module docstring for the meaning of each field."""

    content: str | None = DEFAULT_CONTENT
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: dict[str, Any] | None = None
    gate: threading.Event | None = None
    raw: bytes | None = None
    drop: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    """What the server received: the path, lower-cased headers and the parsed JSON body."""

    path: str
    headers: dict[str, str]
    json: Any


def completion_body(content: str | None, model: str = "test-model") -> dict[str, Any]:
    """An OpenAI ``chat.completion`` object whose single choice carries ``content``."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _error_body(status: int) -> dict[str, Any]:
    return {"error": {"message": f"scripted error {status}", "type": "test_error", "code": str(status)}}


class OpenAIServer(StandInServer):
    """A background uvicorn server answering chat completions with scripted replies."""

    thread_name = "openai-test-server"

    def __init__(self, *, default: Reply | None = None) -> None:
        self.default = default or Reply()
        self.handler: Callable[[Any], Reply | str] | None = None
        self.requests: list[RecordedRequest] = []
        self.in_flight = InFlight()
        self._queue: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()

    # -- scripting ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL for OpenAI-compatible clients (ends in ``/v1``, as LiteLLM expects)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply | str) -> None:
        """Append replies to serve next, in order; a ``str`` is shorthand for ``Reply(content=...)``."""
        with self._lock:
            self._queue.extend(Reply(content=r) if isinstance(r, str) else r for r in replies)

    def reset(self) -> None:
        """Forget queued replies, recorded requests, the handler and any custom default."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
        self.in_flight.reset()
        self.handler = None
        self.default = Reply()

    def _next_reply(self, payload: Any) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.handler is not None:
            reply = self.handler(payload)
            return Reply(content=reply) if isinstance(reply, str) else reply
        return self.default

    # -- ASGI ----------------------------------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        if raw is None:
            return
        try:
            payload: Any = json.loads(raw) if raw else None
        except ValueError:
            payload = raw.decode("utf-8", "replace")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path = scope["path"]
        with self._lock:
            self.requests.append(RecordedRequest(path=path, headers=headers, json=payload))
        if scope["method"] != "POST" or path not in CHAT_PATHS:
            await self._send(send, 404, {"error": {"message": f"no route {path}"}}, {})
            return
        reply = self._next_reply(payload)
        with self.in_flight:
            if await client_left_while_held(receive, reply.delay, reply.gate):
                return
            if reply.drop:
                await _drop(send)
                return
            if reply.raw is not None:
                await send_json_bytes(send, reply.status, reply.raw, reply.headers)
                return
            if reply.body is not None:
                body = reply.body
            elif reply.status >= 400:
                body = _error_body(reply.status)
            else:
                model = payload.get("model", "test-model") if isinstance(payload, dict) else "test-model"
                body = completion_body(reply.content, model)
            await self._send(send, reply.status, body, reply.headers)

    @staticmethod
    async def _send(send: Any, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        await send_json_bytes(send, status, json.dumps(body).encode(), headers)


async def _drop(send: Any) -> None:
    """Start an answer and leave it unfinished: the server closes the connection mid-body."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"1000")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-', "more_body": True})
