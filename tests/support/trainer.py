"""A scriptable TrainGate stand-in on loopback, for client and server tests (fixture ``trainer``).

It is a real uvicorn server on ``127.0.0.1:<free port>`` in a background thread that serves the two
endpoints a RolloutServer calls back::

    POST /v1/chat/completions     -> a chat completion (script it, or let the default policy answer)
    POST /v1/rollout/completed    -> 200 {"status": "ok"}; the payload is kept per rollout_id

Use it through the ``trainer`` fixture (``tests/conftest.py``)::

    from tests.support.trainer import Reply

    async def test_x(trainer):
        trainer.queue_chat(Reply(status=503), Reply(status=429, headers={"Retry-After": "0.2"}))
        client = OsmosisLLMClient(trainer.url, "r-1", api_key="secret")
        result = await client.chat_completions([{"role": "user", "content": "hi"}])
        assert [r.status for r in trainer.chat_requests] == [503, 429, 200]
        assert trainer.chat_requests[-1].headers["authorization"] == "Bearer secret"

API:

* ``url``: ``http://127.0.0.1:<port>`` (use it as ``RolloutRequest.server_url``).
* ``queue_chat(*replies)`` / ``queue_completed(*replies)``: replies served first-in first-out before the
  default answer of that endpoint. ``Reply(status=200, body=None, headers={}, delay=0.0)``: ``body``
  ``None`` means the default body for the endpoint (a normal completion, or ``{"status": "ok"}``; for
  ``status >= 300`` a small error object); a dict/list is sent as JSON; ``str``/``bytes`` are sent raw
  (malformed bodies). ``delay`` seconds are waited first, ending early if the client disconnects;
  with ``gate`` (a ``threading.Event``) the answer waits until the test sets it (at most a minute).
* The default chat answer follows ``tool_turns`` (default 0): while the request holds fewer than
  ``tool_turns`` assistant messages, the reply calls tool ``add`` with ``{"a": 1, "b": 2}``; then it
  answers ``"The answer is #### 3"``. Set ``chat_handler`` (``payload -> Reply | dict``; a dict is the
  assistant message) to take full control. Every completion carries ``usage`` (prompt tokens = 10 per
  request message, 8 completion tokens), ``token_ids`` and ``logprobs``.
* ``requests`` (all, in arrival order), ``chat_requests``, ``completed_requests``: ``Recorded(path,
  headers (lower-case keys), json (None if not JSON), body (bytes), status (what was answered))``.
* ``in_flight``: requests held right now (``in_flight.now``) and the most at once (``in_flight.peak``).
* ``completed``: ``{rollout_id: payload}`` of successfully acknowledged completions (the FIRST terminal
  report wins; later ones are still recorded in ``completed_requests``).
* ``wait_completed(rollout_id, timeout=5.0) -> payload`` blocks (in a thread-safe way) until that
  rollout's completion arrived; raises ``TimeoutError`` otherwise. In async tests call it via
  ``await asyncio.to_thread(trainer.wait_completed, rid)`` or poll ``trainer.completed``.
* ``reset()`` clears queues, records, ``tool_turns`` and ``chat_handler`` (the fixture does it per test).
"""

from __future__ import annotations

import collections
import dataclasses
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

CHAT_PATH = "/v1/chat/completions"
COMPLETED_PATH = "/v1/rollout/completed"


@dataclass(frozen=True)
class Reply:
    """One scripted answer (see the module docstring)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    gate: threading.Event | None = None


@dataclass(frozen=True)
class Recorded:
    """One request as received, with the status that was answered."""

    path: str
    headers: dict[str, str]
    json: Any
    body: bytes
    status: int


def completion(message: dict[str, Any], n_messages: int, rollout_id: str = "r") -> dict[str, Any]:
    """A TrainGate-style chat completion carrying ``message``."""
    prompt = 10 * n_messages
    return {
        "id": f"cmpl-{rollout_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "default",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8},
        "token_ids": list(range(8)),
        "logprobs": [-0.5] * 8,
        "prompt_token_ids": list(range(prompt)),
    }


def add_tool_call(turn: int) -> dict[str, Any]:
    """An assistant message calling ``add(a=1, b=2)``."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 2})},
            }
        ],
    }


FINAL_MESSAGE = {"role": "assistant", "content": "The answer is #### 3"}


class TrainerStandIn(StandInServer):
    """The background server; see the module docstring."""

    thread_name = "trainer-stand-in"

    def __init__(self) -> None:
        self.tool_turns = 0
        self.chat_handler: Callable[[Any], Reply | dict[str, Any]] | None = None
        self.requests: list[Recorded] = []
        self.completed: dict[str, Any] = {}
        self.in_flight = InFlight()
        self._queues: dict[str, collections.deque[Reply]] = {
            CHAT_PATH: collections.deque(),
            COMPLETED_PATH: collections.deque(),
        }
        self._cond = threading.Condition()

    # -- scripting and inspection ------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue_chat(self, *replies: Reply) -> None:
        with self._cond:
            self._queues[CHAT_PATH].extend(replies)

    def queue_completed(self, *replies: Reply) -> None:
        with self._cond:
            self._queues[COMPLETED_PATH].extend(replies)

    @property
    def chat_requests(self) -> list[Recorded]:
        with self._cond:
            return [r for r in self.requests if r.path == CHAT_PATH]

    @property
    def completed_requests(self) -> list[Recorded]:
        with self._cond:
            return [r for r in self.requests if r.path == COMPLETED_PATH]

    def wait_completed(self, rollout_id: str, timeout: float = 5.0) -> Any:
        with self._cond:
            if not self._cond.wait_for(lambda: rollout_id in self.completed, timeout):
                raise TimeoutError(f"no completion for rollout {rollout_id!r} within {timeout}s")
            return self.completed[rollout_id]

    def reset(self) -> None:
        with self._cond:
            for queue in self._queues.values():
                queue.clear()
            self.requests.clear()
            self.completed.clear()
        self.in_flight.reset()
        self.tool_turns = 0
        self.chat_handler = None

    # -- request handling ----------------------------------------------------------------------

    def _reply_for(self, path: str, payload: Any) -> Reply:
        with self._cond:
            queue = self._queues.get(path)
            queued = queue.popleft() if queue else None
        if queued is None:
            return self._default_reply(path, payload)
        if queued.body is None and queued.status < 300:
            return dataclasses.replace(queued, body=self._default_reply(path, payload).body)
        return queued

    def _default_reply(self, path: str, payload: Any) -> Reply:
        if path == COMPLETED_PATH:
            return Reply(body={"status": "ok"})
        if path != CHAT_PATH:
            return Reply(status=404, body={"detail": "Not Found"})
        messages = payload.get("messages", []) if isinstance(payload, dict) else []
        rollout_id = str(payload.get("rollout_id", "r")) if isinstance(payload, dict) else "r"
        if self.chat_handler is not None:
            handled = self.chat_handler(payload)
            if isinstance(handled, Reply):
                return handled
            return Reply(body=completion(handled, len(messages), rollout_id))
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        message = add_tool_call(turn) if turn < self.tool_turns else FINAL_MESSAGE
        return Reply(body=completion(message, len(messages), rollout_id))

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        if raw is None:
            return
        try:
            payload: Any = json.loads(raw)
        except ValueError:
            payload = None
        path = scope["path"]
        reply = self._reply_for(path, payload) if scope["method"] == "POST" else Reply(status=405)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        with self._cond:
            self.requests.append(Recorded(path, headers, payload, raw, reply.status))
            if path == COMPLETED_PATH and 200 <= reply.status < 300 and isinstance(payload, dict):
                self.completed.setdefault(str(payload.get("rollout_id")), payload)
            self._cond.notify_all()
        with self.in_flight:
            if await client_left_while_held(receive, reply.delay, reply.gate):
                return
            await self._send(send, reply)

    @staticmethod
    async def _send(send: Any, reply: Reply) -> None:
        body = reply.body
        if body is None and reply.status >= 300:
            body = {"detail": f"scripted status {reply.status}"}
        if isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = b"" if body is None else json.dumps(body).encode()
        await send_json_bytes(send, reply.status, data, reply.headers)
