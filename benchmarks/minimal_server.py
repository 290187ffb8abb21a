"""The floor of the rollout-server benchmark: about the least a rollout server can do.

    python benchmarks/minimal_server.py PORT

An aiohttp app with one route, ``POST /v1/rollout/init``: it answers 202 at once and runs the
calculator's turn structure in a task — ask TrainGate for a completion with the whole conversation,
answer each ``add`` tool call with the sum, repeat until a reply has no tool call (or ``max_turns``),
then report COMPLETED. No validation, no authentication, no deadline, no queue limit, one shared
client session. It is the yardstick :mod:`benchmarks.rollout_server` divides by, not a design to
follow: everything the SDK's server does beyond this is what the ratio prices.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from aiohttp import ClientSession, TCPConnector, web

SESSION = web.AppKey("session", ClientSession)


async def _run(session: ClientSession, request: dict[str, Any]) -> None:
    trainer = request["server_url"].rstrip("/")
    messages = list(request["messages"])
    for _ in range(int(request.get("max_turns") or 10)):
        chat = {
            "rollout_id": request["rollout_id"],
            "messages": messages,
            **request.get("completion_params", {}),
        }
        async with session.post(f"{trainer}/v1/chat/completions", json=chat) as reply:
            message = (await reply.json())["choices"][0]["message"]
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            break
        for call in calls:
            arguments = json.loads(call["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": str(arguments["a"] + arguments["b"])}
            )
    done = {
        "rollout_id": request["rollout_id"],
        "status": "COMPLETED",
        "final_messages": messages,
        "finish_reason": "stop",
        "reward": 1.0,
    }
    async with session.post(f"{trainer}/v1/rollout/completed", json=done) as reply:
        await reply.read()


def build_app() -> web.Application:
    running: set[asyncio.Task[None]] = set()  # strong references until each rollout ends

    async def init(http_request: web.Request) -> web.Response:
        request = await http_request.json()
        task = asyncio.create_task(_run(http_request.app[SESSION], request))
        running.add(task)
        task.add_done_callback(running.discard)
        return web.json_response({"rollout_id": request["rollout_id"], "tools": []}, status=202)

    async def session_context(app: web.Application) -> Any:
        async with ClientSession(connector=TCPConnector(limit=1000)) as session:
            app[SESSION] = session
            yield

    app = web.Application()
    app.cleanup_ctx.append(session_context)
    app.router.add_post("/v1/rollout/init", init)
    return app


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9001
    web.run_app(build_app(), host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
