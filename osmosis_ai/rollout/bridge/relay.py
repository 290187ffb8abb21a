"""A chat relay: one rollout's OpenAI-compatible chat endpoint on loopback, answered by a 0.2 chat.

A 0.3 workflow calls ``{chat_completions_url}/chat/completions`` with whatever OpenAI client it
likes; a 0.2 trainer takes chat calls only through the rollout's own client (``RolloutContext.chat``,
which adds the rollout id and keeps the rollout's counters). The relay is that endpoint: it listens
on a free loopback port for as long as the rollout runs, takes only the rollout's own key, and hands
each request's messages and sampling parameters to the 0.2 chat, answering with an OpenAI chat
completion. A failed chat is answered 502 and kept (:attr:`ChatRelay.failure`), so the caller can
report the failure as the chat's own typed error rather than as whatever the workflow's HTTP client
made of the 502.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from osmosis_ai._sockets import bind_listener
from osmosis_ai.rollout.server.api_key import authorized

Chat = Callable[..., Awaitable[Any]]  # RolloutContext.chat: (messages, **params) -> CompletionsResult

MAX_BODY_BYTES = 64 * 1024 * 1024
# Fields the rollout decides, not the workflow: the policy is the trainer's, replies are whole.
_NOT_PASSED = frozenset({"messages", "model", "stream", "stream_options"})


class ChatRelay:
    """The endpoint of one rollout while open: :attr:`base_url` (append ``/chat/completions``) and
    :attr:`api_key` (``Authorization: Bearer``) are what the workflow's rollout context carries."""

    def __init__(self, chat: Chat, model: str = "policy") -> None:
        self.chat = chat
        self.model = model
        self.api_key = secrets.token_urlsafe(24)
        self.base_url = ""
        self.failure: BaseException | None = None
        self._calls = 0

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        if not authorized(request.headers.get("Authorization"), self.api_key):
            return _error(web, 401, "this endpoint takes only the rollout's own key")
        try:
            body = await request.json()
        except ValueError:
            return _error(web, 400, "the request body is not JSON")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            return _error(web, 400, "the request has no 'messages' list")
        if body.get("stream"):
            return _error(web, 400, "streaming is not supported on this endpoint: send stream=false")
        params = {k: v for k, v in body.items() if k not in _NOT_PASSED}
        try:
            result = await self.chat(messages, **params)
        except Exception as exc:  # the rollout's chat failed: kept for the caller, told to the workflow
            if self.failure is None:
                self.failure = exc
            return _error(web, 502, f"the trainer's chat call failed: {exc}")
        self._calls += 1
        return web.json_response(self._completion(result))

    def _completion(self, result: Any) -> dict[str, Any]:
        """``result`` (a 0.2 ``CompletionsResult``) as an OpenAI chat completion."""
        usage = dict(result.usage or {})
        usage.setdefault("prompt_tokens", 0)
        usage.setdefault("completion_tokens", 0)
        usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
        return {
            "id": f"chatcmpl-relay-{self._calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": result.message, "finish_reason": result.finish_reason}],
            "usage": usage,
        }

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[ChatRelay]:
        """Listen on a free loopback port until the block ends."""
        from aiohttp import web

        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/chat/completions", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            sock = bind_listener("127.0.0.1")
            port = sock.getsockname()[1]
            await web.SockSite(runner, sock).start()
            self.base_url = f"http://127.0.0.1:{port}/v1"
            yield self
        finally:
            await runner.cleanup()


def _error(web: Any, status: int, message: str) -> Any:
    return web.json_response({"error": {"message": message, "type": "relay_error"}}, status=status)
