"""About the least a server can do for ``workflow_main.py``'s rollouts, for ``benchmarks.v03_servers``:
a bare ASGI app on uvicorn answering ``POST /rollout`` (202) and ``GET /rollout/{id}/result`` (a
long poll on the rollout's future) from memory, running the same model call through the same shared
httpx client and the same exact-answer grading. No validation, no lease, no deadline, no slots, no
persistence, no middleware: the part of a server's CPU per rollout that is uvicorn, the event loop
and the workflow's own call, which no 0.3 server on uvicorn can save.

    _OSMOSIS_ROLLOUT_PORT=PORT python bare_main.py
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import uvicorn

CLIENT = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=512))
RESULTS: dict[str, asyncio.Future[bytes]] = {}
TASKS: set[asyncio.Task[None]] = set()
Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


async def rollout(request: dict[str, Any], result: asyncio.Future[bytes]) -> None:
    try:
        result.set_result(await run(request))
    except Exception as exc:  # counted by the benchmark as a rollout that did not succeed
        failure = {"rollout_id": request["rollout_id"], "status": "failure", "err_message": repr(exc)}
        result.set_result(json.dumps(failure).encode())


async def run(request: dict[str, Any]) -> bytes:
    prompt = request["initial_messages"]
    response = await CLIENT.post(
        f"{request['chat_completions_url']}/chat/completions",
        json={"model": "policy", "messages": prompt},
        headers={"Authorization": f"Bearer {request['llm_api_key']}"},
    )
    response.raise_for_status()
    messages = [*prompt, response.json()["choices"][0]["message"]]
    reward = 1.0 if messages[-1]["content"] == request.get("label") else 0.0
    sample = {"messages": messages, "label": request.get("label"), "reward": reward}
    return json.dumps({"rollout_id": request["rollout_id"], "status": "success", "sample": sample}).encode()


async def answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    path = scope["path"]
    if scope["method"] == "POST" and path == "/rollout":
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        request = json.loads(b"".join(chunks))
        loop = asyncio.get_running_loop()
        result = RESULTS[request["rollout_id"]] = loop.create_future()
        task = loop.create_task(rollout(request, result))
        TASKS.add(task)
        task.add_done_callback(TASKS.discard)
        admission = {"rollout_id": request["rollout_id"], "status": "queued",
                     "polling_lease_token": secrets.token_urlsafe(32), "result_wait_timeout_sec": 30.0,
                     "polling_lease_timeout_sec": 120.0}  # fmt: skip
        await answer(send, 202, json.dumps(admission).encode())
    elif path.startswith("/rollout/") and path.endswith("/result"):
        rollout_id = path[len("/rollout/") : -len("/result")]
        result = RESULTS[rollout_id]
        await asyncio.wait((result,), timeout=30)
        if result.done():
            del RESULTS[rollout_id]
            await answer(send, 200, result.result())
        else:
            await answer(send, 200, json.dumps({"rollout_id": rollout_id, "status": "running"}).encode())
    else:
        await answer(send, 200, b'{"status": "ok"}')


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["_OSMOSIS_ROLLOUT_PORT"]), log_level="warning")
