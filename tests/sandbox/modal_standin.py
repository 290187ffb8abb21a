"""A stand-in for Modal's control plane and task command router, speaking the gRPC subset that
Modal's own client (``modal`` 1.6) calls for ``App.lookup``, ``Sandbox.create``/``from_name``,
``exec`` (stdin, stdout, stderr, exit status) and ``terminate``, served with grpclib from the
service bases shipped in the client's wheel (``modal_proto``), over a real socket.

A "sandbox" is a directory of its own; its commands run as plain subprocesses there (no isolation:
this checks the wire, not containment). It counts what a bill would (sandboxes created and
terminated, processes started) and can lose create and exec answers or refuse creates with a gRPC status.
Both services share one port: the command router's address handed to the client is the stand-in's.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server, Stream
from modal_proto import api_grpc, api_pb2, task_command_router_grpc
from modal_proto import task_command_router_pb2 as router_pb2

from osmosis_ai.sandbox.remote import WORKDIR

TOKEN_ID = "ak-standin"
TOKEN_SECRET = "as-standin"
Handler = Callable[[Any, Stream[Any, Any]], Coroutine[Any, Any, None]]


def _unimplemented(name: str) -> Handler:
    async def refuse(self: Any, stream: Stream[Any, Any]) -> None:
        self.unimplemented.append(name)
        raise GRPCError(Status.UNIMPLEMENTED, f"{name} is not in the stand-in")

    return refuse


def _complete(base: type) -> type:
    """``base`` with every RPC the stand-in does not serve answering UNIMPLEMENTED."""
    names = sorted(base.__abstractmethods__)  # type: ignore[attr-defined]
    return type(f"{base.__name__}Refusing", (base,), {name: _unimplemented(name) for name in names})


def _jwt() -> str:
    claims = json.dumps({"exp": int(time.time()) + 3600}).encode()
    return "e30." + base64.urlsafe_b64encode(claims).decode().rstrip("=") + ".standin"


@dataclass
class Exec:
    process: asyncio.subprocess.Process
    output: dict[int, bytearray]
    changed: asyncio.Condition
    pumps: asyncio.Future[Any]


@dataclass
class Box:
    root: Path
    name: str
    ttl: int
    network: int
    task_id: str
    jwt: str
    execs: dict[str, Exec] = field(default_factory=dict)


class _ControlPlane(_complete(api_grpc.ModalClientBase)):  # type: ignore[misc]
    def __init__(self, standin: ModalStandIn) -> None:
        self.standin = standin
        self.unimplemented = standin.unimplemented

    async def _request(self, stream: Stream[Any, Any]) -> Any:
        metadata = stream.metadata or {}
        if (metadata.get("x-modal-token-id"), metadata.get("x-modal-token-secret")) != (
            TOKEN_ID,
            TOKEN_SECRET,
        ):
            raise GRPCError(Status.UNAUTHENTICATED, "invalid token")
        return await stream.recv_message()

    async def AuthTokenGet(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=_jwt()))

    async def AppGetOrCreate(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=f"ap-{request.app_name}"))

    async def EnvironmentGetOrCreate(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream)
        settings = api_pb2.EnvironmentSettings(image_builder_version="2025.06")
        metadata = api_pb2.EnvironmentMetadata(name="main", settings=settings)
        await stream.send_message(
            api_pb2.EnvironmentGetOrCreateResponse(environment_id="en-1", metadata=metadata)
        )

    async def ImageGetOrCreate(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        self.standin.images.append(list(request.image.dockerfile_commands))
        built = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(image_id="im-standin", result=built))

    async def SandboxCreateV2(self, stream: Stream[Any, Any]) -> None:
        standin = self.standin
        standin.create_requests += 1
        request = await self._request(stream)
        if standin.refuse_with is not None:
            raise GRPCError(standin.refuse_with, "the stand-in refuses")
        definition = request.definition
        if any(box.name == definition.name for box in standin.boxes.values()):
            raise GRPCError(Status.ALREADY_EXISTS, f"a sandbox named {definition.name!r} is running")
        sandbox = f"sb-{secrets.token_hex(6)}"
        box = Box(Path(tempfile.mkdtemp(prefix="modal-standin-")), definition.name, definition.timeout_secs,
                  definition.network_access.network_access_type, f"ta-{secrets.token_hex(6)}", _jwt())  # fmt: skip
        standin.boxes[sandbox] = box
        standin.created += 1
        standin.made.append((box.name, box.ttl, box.network))
        if standin.lose_create_answers > 0:  # made, but the answer is lost on the way
            standin.lose_create_answers -= 1
            raise GRPCError(Status.UNAVAILABLE, "the answer was lost")
        await stream.send_message(self._created(sandbox))

    def _created(self, sandbox: str) -> api_pb2.SandboxCreateV2Response:
        box = self.standin.boxes[sandbox]
        access = api_pb2.CommandRouterAccess(url=self.standin.url, jwt=box.jwt)
        return api_pb2.SandboxCreateV2Response(
            sandbox_id=sandbox, task_id=box.task_id, command_router_access=access
        )

    async def SandboxGetFromNameV2(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        for sandbox, box in self.standin.boxes.items():
            if box.name == request.sandbox_name:
                await stream.send_message(api_pb2.SandboxGetFromNameResponse(sandbox_id=sandbox))
                return
        raise GRPCError(Status.NOT_FOUND, f"no running sandbox named {request.sandbox_name!r}")

    async def SandboxGetFromName(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        raise GRPCError(Status.NOT_FOUND, f"no running sandbox named {request.sandbox_name!r}")

    async def SandboxGetTaskIdV2(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        box = self.standin.boxes.get(request.sandbox_id)
        if box is None:
            ended = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
            await stream.send_message(api_pb2.SandboxGetTaskIdResponse(task_result=ended))
            return
        await stream.send_message(api_pb2.SandboxGetTaskIdResponse(task_id=box.task_id))

    async def SandboxGetCommandRouterAccess(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        found = [(s, b) for s, b in self.standin.boxes.items() if request.task_id in (b.task_id, "") and
                 request.sandbox_id in (s, "")]  # fmt: skip
        if not found:
            raise GRPCError(Status.NOT_FOUND, "no such sandbox")
        answer = api_pb2.SandboxGetCommandRouterAccessResponse(url=self.standin.url, jwt=found[0][1].jwt)
        await stream.send_message(answer)

    async def SandboxWaitV2(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        if request.sandbox_id in self.standin.boxes:
            await stream.send_message(api_pb2.SandboxWaitResponse())
            return
        ended = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
        await stream.send_message(api_pb2.SandboxWaitResponse(result=ended))

    async def SandboxTerminateV2(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream)
        if request.sandbox_id in self.standin.boxes:
            await self.standin.end(request.sandbox_id)
            self.standin.terminated.append(request.sandbox_id)
        await stream.send_message(api_pb2.SandboxTerminateResponse())


class _CommandRouter(_complete(task_command_router_grpc.TaskCommandRouterBase)):  # type: ignore[misc]
    def __init__(self, standin: ModalStandIn) -> None:
        self.standin = standin
        self.unimplemented = standin.unimplemented

    async def _request(self, stream: Stream[Any, Any]) -> tuple[Any, Box]:
        request = await stream.recv_message()
        for box in self.standin.boxes.values():
            if box.task_id == request.task_id:
                if (stream.metadata or {}).get("authorization") != f"Bearer {box.jwt}":
                    raise GRPCError(Status.UNAUTHENTICATED, "bad token")
                return request, box
        raise GRPCError(Status.NOT_FOUND, f"no task {request.task_id!r}")

    def _exec(self, box: Box, exec_id: str) -> Exec:
        if exec_id not in box.execs:
            raise GRPCError(Status.NOT_FOUND, f"no exec {exec_id!r}")
        return box.execs[exec_id]

    async def TaskExecStart(self, stream: Stream[Any, Any]) -> None:
        request, box = await self._request(stream)
        self.standin.exec_requests += 1
        if request.exec_id not in box.execs:  # the exec id is its idempotency key
            argv = [arg.replace(WORKDIR, str(box.root)) for arg in request.command_args]
            env = {"PATH": os.environ["PATH"]}
            for source in request.secret_sources:
                env.update(source.env.contents)
            process = await asyncio.create_subprocess_exec(
                *argv, env=env, cwd=box.root, start_new_session=True, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            self.standin.processes += 1
            output = {router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT: bytearray(),
                      router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR: bytearray()}  # fmt: skip
            changed = asyncio.Condition()

            async def pump(pipe: asyncio.StreamReader | None, kept: bytearray) -> None:
                assert pipe is not None
                while chunk := await pipe.read(65536):
                    async with changed:
                        kept += chunk
                        changed.notify_all()

            async def pumps() -> None:
                await asyncio.gather(*(pump(pipe, output[fd]) for pipe, fd in (
                    (process.stdout, router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT),
                    (process.stderr, router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR))))  # fmt: skip
                await process.wait()
                async with changed:
                    changed.notify_all()

            box.execs[request.exec_id] = Exec(process, output, changed, asyncio.ensure_future(pumps()))
            if self.standin.lose_exec_answers > 0:  # started, but the answer is lost on the way
                self.standin.lose_exec_answers -= 1
                raise GRPCError(Status.UNAVAILABLE, "the answer was lost")
        await stream.send_message(router_pb2.TaskExecStartResponse())

    async def TaskExecStdinWrite(self, stream: Stream[Any, Any]) -> None:
        request, box = await self._request(stream)
        stdin = self._exec(box, request.exec_id).process.stdin
        assert stdin is not None
        stdin.write(request.data)
        if request.eof:
            stdin.close()
        await stream.send_message(router_pb2.TaskExecStdinWriteResponse())

    async def TaskExecStdioRead(self, stream: Stream[Any, Any]) -> None:
        request, box = await self._request(stream)
        running = self._exec(box, request.exec_id)
        kept, offset = running.output[request.file_descriptor], request.offset
        while True:
            async with running.changed:
                if len(kept) == offset and running.pumps.done():
                    return
                if len(kept) == offset:
                    await running.changed.wait()
                chunk = bytes(kept[offset:])
            if chunk:
                await stream.send_message(router_pb2.TaskExecStdioReadResponse(data=chunk))
                offset += len(chunk)

    async def TaskExecWait(self, stream: Stream[Any, Any]) -> None:
        request, box = await self._request(stream)
        running = self._exec(box, request.exec_id)
        await running.pumps
        code = running.process.returncode
        assert code is not None
        ended = (
            router_pb2.TaskExecWaitResponse(signal=-code)
            if code < 0
            else router_pb2.TaskExecWaitResponse(code=code)
        )
        await stream.send_message(ended)


@dataclass
class ModalStandIn:
    created: int = 0
    create_requests: int = 0
    exec_requests: int = 0
    processes: int = 0
    terminated: list[str] = field(default_factory=list)
    made: list[tuple[str, int, int]] = field(default_factory=list)  # (name, timeout_secs, network access)
    images: list[list[str]] = field(default_factory=list)
    boxes: dict[str, Box] = field(default_factory=dict)
    unimplemented: list[str] = field(default_factory=list)
    lose_create_answers: int = 0
    lose_exec_answers: int = 0
    refuse_with: Status | None = None
    url: str = ""
    _server: Server | None = None

    async def start(self) -> ModalStandIn:
        self._server = Server([_ControlPlane(self), _CommandRouter(self)])
        await self._server.start("127.0.0.1", 0)
        port = self._server._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def end(self, sandbox: str) -> None:
        box = self.boxes.pop(sandbox)
        for running in box.execs.values():
            if running.process.returncode is None:
                os.killpg(running.process.pid, signal.SIGKILL)
            await running.pumps
        shutil.rmtree(box.root, ignore_errors=True)

    async def close(self) -> None:
        for sandbox in list(self.boxes):
            await self.end(sandbox)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
