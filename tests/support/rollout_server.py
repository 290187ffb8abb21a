"""A tiny stand-in rollout server (the RolloutServer side) for TrainGate failure tests.

It runs in the test's event loop on a free loopback port (aiohttp) and answers
``POST /v1/rollout/init`` according to ``mode``:

* ``"script"``: 202 with ``tools``, then runs ``script(init_body, callback)`` in the background,
  where ``await callback(path, json, key=...)`` POSTs to the TrainGate (default key: the init's
  ``api_key``) and returns ``(status, parsed body)``;
* ``"silent"``: 202 with ``tools`` and never calls back;
* ``"reject"``: ``status`` with ``body`` as plain text.

Whatever the mode, the first ``busy`` inits are answered 503 with ``Retry-After: 0`` (a server
waiting out an outage of its shared state).

``inits`` records every init body received.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.server import ADD_TOOL
from tests.support.sockets import listener

Callback = Callable[..., Awaitable[tuple[int, Any]]]
Script = Callable[[dict[str, Any], Callback], Awaitable[None]]


class StandInRolloutServer:
    """See the module docstring. ``async with StandInRolloutServer(mode=...) as server: server.url``."""

    def __init__(
        self,
        mode: str = "script",
        *,
        script: Script | None = None,
        status: int = 500,
        body: str = "Internal Server Error",
        busy: int = 0,
    ) -> None:
        self.mode = mode
        self.busy = busy
        self.script = script
        self.status = status
        self.body = body
        self.inits: list[dict[str, Any]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def _init(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.inits.append(body)
        if len(self.inits) <= self.busy:
            return web.Response(status=503, text="shared state unreachable", headers={"Retry-After": "0"})
        if self.mode == "reject":
            return web.Response(status=self.status, text=self.body)
        if self.mode == "script" and self.script is not None:
            task = asyncio.create_task(self.script(body, self._callback_for(body)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return web.json_response({"rollout_id": body["rollout_id"], "tools": [ADD_TOOL]}, status=202)

    def _callback_for(self, init: dict[str, Any]) -> Callback:
        async def callback(path: str, payload: dict[str, Any], key: str | None = None) -> tuple[int, Any]:
            assert self._http is not None
            token = init.get("api_key") if key is None else key
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with self._http.post(
                init["server_url"].rstrip("/") + path, json=payload, headers=headers
            ) as r:
                return r.status, await r.json()

        return callback

    async def __aenter__(self) -> StandInRolloutServer:
        app = web.Application()
        app.router.add_post("/v1/rollout/init", self._init)
        app.router.add_get("/health", lambda _: web.json_response({"status": "healthy"}))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        sock = listener()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        await web.SockSite(self._runner, sock).start()
        self._http = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()
