"""Helpers for server tests: run an app under uvicorn on a free loopback port, and scriptable agent loops."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response

from osmosis_ai.rollout import RolloutAgentLoop, RolloutContext, RolloutRequest, RolloutResult
from osmosis_ai.rollout.config.settings import RolloutClientSettings, RolloutServerSettings, RolloutSettings
from osmosis_ai.rollout.server.config import ServerConfig
from osmosis_ai.rollout.server.runner import DrainingServer
from tests.support.threaded_server import ThreadedServer

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}


def fast_settings(**server: Any) -> RolloutSettings:
    """Settings with short retry delays and timeouts; ``server`` overrides bypass range checks (tests only)."""
    client = RolloutClientSettings(
        timeout_seconds=2.0, retry_base_delay=0.1, retry_max_delay=1.0, connect_timeout_seconds=1.0
    )
    return RolloutSettings(client=client, server=RolloutServerSettings().model_copy(update=server))


def fast_config(settings: RolloutSettings | None = None, **fields: Any) -> ServerConfig:
    """A ``ServerConfig`` with :func:`fast_settings` (or ``settings``) and ``fields``."""
    settings = settings or fast_settings()
    return ServerConfig(**{"server": settings.server, "client": settings.client, **fields})


class RunningServer(ThreadedServer):
    """A ``create_app`` app under ``DrainingServer`` (drain while HTTP is up, as ``osmosis serve``);
    any other app under plain uvicorn."""

    def __init__(self, app: Any, sock: socket.socket | None = None) -> None:
        if hasattr(getattr(app, "state", None), "rollout_lifecycle"):
            super().__init__(
                app, sock=sock, lifespan="on", make_server=lambda config: DrainingServer(config, app)
            )
        else:
            super().__init__(app, sock=sock, lifespan="on")


Behaviour = Callable[[RolloutContext], Awaitable[RolloutResult | Any]]


class ScriptedAgent(RolloutAgentLoop):
    """An agent loop whose tools and run behaviour each test sets."""

    name = "scripted"

    def __init__(self, behaviour: Behaviour | None = None, tools: Any = None) -> None:
        self.behaviour = behaviour
        self.tools = [ADD_TOOL] if tools is None else tools
        self.get_tools_calls = 0

    def get_tools(self, request: RolloutRequest) -> Any:
        self.get_tools_calls += 1
        if isinstance(self.tools, BaseException):
            raise self.tools
        if callable(self.tools):
            return self.tools(request)
        return self.tools

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        if self.behaviour is not None:
            return await self.behaviour(ctx)
        messages = list(ctx.request.messages)
        result = await ctx.chat(messages)
        messages.append(result.message)
        await ctx.log_event("rollout_complete", turns=1)
        return ctx.complete(messages, reward=1.0)


async def chat_then_fail(ctx: RolloutContext) -> RolloutResult:
    """One successful chat, then an exception with an empty message."""
    await ctx.chat(list(ctx.request.messages))
    ctx.record_tool_call(2.0)
    raise KeyError()


async def hang(ctx: RolloutContext) -> RolloutResult:
    await ctx.chat(list(ctx.request.messages))
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


def init_body(rollout_id: str, server_url: str, **extra: Any) -> dict[str, Any]:
    """A valid RolloutRequest body."""
    body: dict[str, Any] = {
        "rollout_id": rollout_id,
        "server_url": server_url,
        "messages": [{"role": "user", "content": "What is 1 + 2?"}],
        "completion_params": {"temperature": 0.5},
        "metadata": {"ground_truth": "3"},
        "api_key": "trainer-secret",
    }
    body.update(extra)
    return body


class PlatformStandIn:
    """Records register calls; health-checks the registering server like the real Platform."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.reply: tuple[int, Any] | None = None
        app = FastAPI()

        @app.post("/api/cli/rollout-server/register")
        async def register(request: Request) -> Response:
            body = await request.json()
            self.calls.append({"headers": dict(request.headers), "json": body})
            if self.reply is not None:
                status, payload = self.reply
                content = payload if isinstance(payload, bytes) else json.dumps(payload)
                return Response(status_code=status, content=content)
            async with httpx.AsyncClient(timeout=5) as client:
                check = await client.get(
                    f"http://{body['host']}:{body['port']}/platform/health",
                    headers={"Authorization": f"Bearer {body.get('api_key', '')}"},
                )
            healthy = check.status_code == 200
            return Response(
                content=json.dumps(
                    {
                        "id": "srv-1",
                        "status": "healthy" if healthy else "unhealthy",
                        "health_check_result": {
                            "server_info": check.json() if healthy else None,
                            "error": None if healthy else f"health check answered {check.status_code}",
                        },
                    }
                ),
                media_type="application/json",
            )

        self.server = RunningServer(app)
