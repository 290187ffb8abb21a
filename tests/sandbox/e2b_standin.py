"""A stand-in for E2B's control plane and envd, speaking the subset :mod:`osmosis_ai.sandbox.e2b` uses,
over real sockets. A "sandbox" is a directory of its own; its commands run as plain subprocesses
there (no isolation: this checks the wire, not containment). It counts what a bill would: sandboxes
created and deleted, and can lose create answers or refuse everything."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from osmosis_ai.sandbox.remote import WORKDIR

API_KEY = "e2b_test_key"
SIGNAL_WORDS = {signal.SIGKILL: "killed", signal.SIGSEGV: "segmentation fault", signal.SIGABRT: "aborted"}


@dataclass
class Box:
    root: Path
    metadata: dict[str, str]
    ttl: int
    token: str
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)


@dataclass
class E2BStandIn:
    created: int = 0
    create_requests: int = 0
    deleted: list[str] = field(default_factory=list)
    made: list[tuple[str | None, int]] = field(default_factory=list)  # (idempotency key, time to live)
    boxes: dict[str, Box] = field(default_factory=dict)
    lose_create_answers: int = 0
    refuse_with: int | None = None
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> E2BStandIn:
        app = web.Application()
        app.router.add_post("/sandboxes", self.create)
        app.router.add_get("/v2/sandboxes", self.listing)
        app.router.add_post("/sandboxes/{id}/connect", self.connect)
        app.router.add_delete("/sandboxes/{id}", self.delete)
        app.router.add_post("/files", self.upload)
        app.router.add_get("/files", self.download)
        app.router.add_post("/process.Process/Start", self.start_process)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def close(self) -> None:
        for sandbox in list(self.boxes):
            await self._end(sandbox)
        if self._runner is not None:
            await self._runner.cleanup()

    async def create(self, request: web.Request) -> web.StreamResponse:
        self.create_requests += 1
        if request.headers.get("X-API-Key") != API_KEY:
            return web.json_response({"message": "invalid API key"}, status=401)
        if self.refuse_with is not None:
            return web.json_response({"message": "unavailable"}, status=self.refuse_with)
        body = await request.json()
        sandbox = f"sbx{secrets.token_hex(6)}"
        self.boxes[sandbox] = Box(Path(tempfile.mkdtemp(prefix="e2b-standin-")), body.get("metadata") or {},
                                  int(body["timeout"]), secrets.token_hex(8))  # fmt: skip
        self.created += 1
        self.made.append(((body.get("metadata") or {}).get("osmosis_key"), int(body["timeout"])))
        if self.lose_create_answers > 0:  # made, but the answer never arrives
            self.lose_create_answers -= 1
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        return web.json_response(self._described(sandbox), status=201)

    def _described(self, sandbox: str) -> dict[str, Any]:
        return {"sandboxID": sandbox, "templateID": "base", "clientID": "c", "envdVersion": "0.2.0",
                "envdAccessToken": self.boxes[sandbox].token, "domain": None}  # fmt: skip

    async def listing(self, request: web.Request) -> web.Response:
        if request.headers.get("X-API-Key") != API_KEY:
            return web.json_response({"message": "invalid API key"}, status=401)
        wanted = dict(pair.split("=", 1) for pair in request.query.getall("metadata", []))
        found = [
            self._described(s) for s, box in self.boxes.items() if wanted.items() <= box.metadata.items()
        ]
        return web.json_response(found)

    async def connect(self, request: web.Request) -> web.Response:
        sandbox = request.match_info["id"]
        if sandbox not in self.boxes:
            return web.json_response({"message": "not found"}, status=404)
        return web.json_response(self._described(sandbox))

    async def _end(self, sandbox: str) -> None:
        box = self.boxes.pop(sandbox)
        for process in box.processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
        shutil.rmtree(box.root, ignore_errors=True)

    async def delete(self, request: web.Request) -> web.Response:
        sandbox = request.match_info["id"]
        if sandbox not in self.boxes:
            return web.json_response({"message": "not found"}, status=404)
        await self._end(sandbox)
        self.deleted.append(sandbox)
        return web.Response(status=204)

    def _box(self, request: web.Request) -> Box:
        box = self.boxes.get(request.headers.get("E2b-Sandbox-Id", ""))
        if box is None:
            raise web.HTTPBadGateway(text="no such sandbox")
        if request.headers.get("X-Access-Token") != box.token:
            raise web.HTTPUnauthorized(text="bad access token")
        return box

    def _local(self, box: Box, path: str) -> Path:
        assert path.startswith(WORKDIR + "/"), path
        return box.root / path[len(WORKDIR) + 1 :]

    async def upload(self, request: web.Request) -> web.Response:
        box = self._box(request)
        target = self._local(box, request.query["path"])
        reader = await request.multipart()
        part = await reader.next()
        assert part is not None and part.name == "file"  # type: ignore[union-attr]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(await part.read())  # type: ignore[union-attr]
        return web.json_response([{"name": target.name, "path": request.query["path"], "type": "file"}])

    async def download(self, request: web.Request) -> web.Response:
        target = self._local(self._box(request), request.query["path"])
        if not target.is_file():
            return web.json_response({"message": "file not found"}, status=404)
        return web.Response(body=target.read_bytes())

    async def start_process(self, request: web.Request) -> web.StreamResponse:
        box = self._box(request)
        raw = await request.read()
        size = int.from_bytes(raw[1:5], "big")
        config = json.loads(raw[5 : 5 + size])["process"]
        argv = [config["cmd"], *(arg.replace(WORKDIR, str(box.root)) for arg in config.get("args", []))]
        env = {"PATH": os.environ["PATH"], **config.get("envs", {})}
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        box.processes.append(process)
        answer = web.StreamResponse(headers={"Content-Type": "application/connect+json"})
        await answer.prepare(request)

        async def send(message: dict[str, Any], flags: int = 0) -> None:
            data = json.dumps(message).encode()
            await answer.write(bytes([flags]) + len(data).to_bytes(4, "big") + data)

        await send({"event": {"start": {"pid": process.pid}}})
        out, err = await process.communicate()
        for name, data in (("stdout", out), ("stderr", err)):
            if data:
                await send({"event": {"data": {name: base64.b64encode(data).decode()}}})
        end: dict[str, Any] = {"exited": True, "status": f"exit status {process.returncode}"}
        if process.returncode and process.returncode < 0:
            end = {"status": f"signal: {SIGNAL_WORDS.get(-process.returncode, 'unknown')}"}
        elif process.returncode:
            end["exitCode"] = process.returncode
        await send({"event": {"end": end}})
        await send({}, flags=0x02)
        await answer.write_eof()
        return answer
