"""The Modal provider (``run(..., provider="modal")``), through Modal's own client library.

Modal publishes no HTTP API: its client speaks gRPC to Modal's control plane, and runs commands
through a task command router on the sandbox's worker. This adapter drives the public client
(``modal`` 1.6, the ``sandbox-modal`` extra), so its requests are exactly what Modal serves:

* create: ``App.lookup(app, create_if_missing=True)`` then ``Sandbox.create(app=..., name=<the
  run's idempotency key>, timeout=<the time to live>, block_network=not network, image=...)``. A
  sandbox's name is unique among an app's running sandboxes, so a second create of one run is
  refused (``AlreadyExistsError``) and the first is looked up instead: never two.
* find: ``Sandbox.from_name(app, key)``.
* upload and download: ``sb.exec`` of ``/bin/sh`` writing its stdin to the file, or printing the
  file (the client's own file API calls a Modal-internal tool instead).
* execute: ``sb.exec(*argv, env=...)``, its stdout, stderr and exit status (``128 + n`` for a
  signal, as Modal's client reports it).
* delete: ``sb.terminate()``.

Settings: ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` (or a profile of ``~/.modal.toml``, as the
``modal`` CLI writes it), ``MODAL_SERVER_URL`` (Modal's own setting: another control plane, the
tests' stand-in), ``OSMOSIS_MODAL_APP`` (default ``osmosis-sandbox``), ``OSMOSIS_MODAL_IMAGE`` (a
registry image with ``python3`` and ``/bin/sh``; default Modal's ``debian_slim``).
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox.remote import Executed, ProviderFailure, said

if TYPE_CHECKING:
    import modal

APP = "osmosis-sandbox"
CONNECT_DEADLINE = 10.0
"""Seconds for Modal's control plane to accept a connection (its client alone keeps trying a minute)."""
_MISSING = 44  # the download script's exit status for "no such file"
_WRITE = 'mkdir -p "$(dirname "$1")" && exec cat > "$1"'
_READ = f'[ -f "$1" ] || exit {_MISSING}; exec cat "$1"'
T = TypeVar("T")

_clients: dict[tuple[str, str, str], modal.Client] = {}
_clients_lock = threading.Lock()


class ModalProvider:
    """Modal sandboxes (see the module docstring); arguments override the environment's settings."""

    name = "modal"

    def __init__(
        self,
        *,
        token_id: str | None = None,
        token_secret: str | None = None,
        app: str | None = None,
        image: str | None = None,
        connect_timeout: float = CONNECT_DEADLINE,
    ) -> None:
        try:
            import modal
        except ImportError:
            raise SandboxSettingError(
                "the modal sandbox provider needs Modal's client: pip install 'osmosis-ai[sandbox-modal]'"
            ) from None
        token_id = token_id or modal.config.config.get("token_id")
        token_secret = token_secret or modal.config.config.get("token_secret")
        if not token_id or not token_secret:
            raise SandboxSettingError(
                "the modal sandbox provider needs a token: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET "
                "(or run `modal token new`)"
            )
        self._credentials = (str(modal.config.config.get("server_url")), token_id, token_secret)
        self.app = app or os.environ.get("OSMOSIS_MODAL_APP") or APP
        tag = image or os.environ.get("OSMOSIS_MODAL_IMAGE")
        self.image = modal.Image.from_registry(tag) if tag else modal.Image.debian_slim()
        self.connect_timeout = connect_timeout
        self._sandboxes: dict[str, modal.Sandbox] = {}

    async def _client(self) -> modal.Client:
        """One client per control plane and token for the process: Modal's client runs on a loop of its
        own, so it serves every event loop and thread."""
        import modal

        with _clients_lock:
            client = _clients.get(self._credentials)
        if client is None:
            _, token_id, token_secret = self._credentials
            opened = modal.Client.from_credentials.aio(token_id, token_secret)
            client = await _call("connect to Modal", opened, self.connect_timeout)
            with _clients_lock:
                client = _clients.setdefault(self._credentials, client)
        return client

    async def _sandbox(self, sandbox: str, timeout: float) -> modal.Sandbox:
        import modal

        if sandbox not in self._sandboxes:
            found = modal.Sandbox.from_id.aio(sandbox, client=await self._client())
            self._sandboxes[sandbox] = await _call(f"look up sandbox {sandbox}", found, timeout)
        return self._sandboxes[sandbox]

    async def create(self, *, key: str, ttl: float, network: bool, timeout: float) -> str:
        import modal

        client = await self._client()

        async def made() -> modal.Sandbox:
            app = await modal.App.lookup.aio(self.app, create_if_missing=True, client=client)
            return await modal.Sandbox.create.aio(app=app, name=key, timeout=math.ceil(ttl), image=self.image,
                                                  block_network=not network, client=client)  # fmt: skip

        try:
            sandbox = await _call("create a sandbox", made(), timeout)
        except ProviderFailure as failure:
            if not isinstance(failure.__cause__, modal.exception.AlreadyExistsError):
                raise
            found = await self.find(key, timeout=timeout)  # this run's, whose answer was lost
            if found is None:
                raise
            return found
        self._sandboxes[sandbox.object_id] = sandbox
        return str(sandbox.object_id)

    async def find(self, key: str, *, timeout: float) -> str | None:
        import modal

        client = await self._client()
        try:
            sandbox = await _call(
                "look up a sandbox by name",
                modal.Sandbox.from_name.aio(self.app, key, client=client),
                timeout,
            )
        except ProviderFailure as failure:
            if isinstance(failure.__cause__, modal.exception.NotFoundError):
                return None
            raise
        self._sandboxes[sandbox.object_id] = sandbox
        return str(sandbox.object_id)

    async def _exec(
        self, sandbox: str, argv: Sequence[str], env: Mapping[str, str], stdin: bytes | None, timeout: float
    ) -> tuple[int, bytes, bytes]:
        box = await self._sandbox(sandbox, timeout)

        async def ran() -> tuple[int, bytes, bytes]:
            process = await box.exec.aio(*argv, env=dict(env) or None, text=False)
            if stdin is not None:
                process.stdin.write(stdin)
                process.stdin.write_eof()
                await process.stdin.drain.aio()
            out, err = await asyncio.gather(process.stdout.read.aio(), process.stderr.read.aio())
            return int(await process.wait.aio()), out, err

        code, out, err = await _call(f"run {argv[0]} in sandbox {sandbox}", ran(), timeout)
        if code < 0:  # Modal's client: the exit status could not be read
            raise ProviderFailure(f"sandbox {sandbox} gave no exit status for {argv[0]}", retryable=False)
        return code, out, err

    async def upload(self, sandbox: str, path: str, data: bytes, *, timeout: float) -> None:
        code, _, err = await self._exec(sandbox, ["/bin/sh", "-c", _WRITE, "sh", path], {}, data, timeout)
        if code != 0:
            raise ProviderFailure(f"writing {path} exited {code}: {said(err)}", retryable=False)

    async def download(self, sandbox: str, path: str, *, timeout: float) -> bytes | None:
        code, out, err = await self._exec(sandbox, ["/bin/sh", "-c", _READ, "sh", path], {}, None, timeout)
        if code == _MISSING:
            return None
        if code != 0:
            raise ProviderFailure(f"reading {path} exited {code}: {said(err)}", retryable=False)
        return out

    async def execute(
        self, sandbox: str, argv: Sequence[str], env: Mapping[str, str], *, timeout: float
    ) -> Executed:
        try:
            code, out, err = await self._exec(sandbox, argv, env, None, timeout)
        except ProviderFailure as failure:
            if isinstance(failure.__cause__, asyncio.TimeoutError):
                return Executed(None, b"", b"", timed_out=True)  # the delete that follows ends it
            raise
        return Executed(code, out, err, timed_out=False)

    async def delete(self, sandbox: str, *, timeout: float) -> None:
        import modal

        box = self._sandboxes.pop(sandbox, None)
        try:
            if box is None:
                box = await self._sandbox(sandbox, timeout)
                self._sandboxes.pop(sandbox, None)
            await _call(f"terminate sandbox {sandbox}", box.terminate.aio(), timeout)
        except ProviderFailure as failure:
            if not isinstance(failure.__cause__, modal.exception.NotFoundError):
                raise
        finally:
            if box is not None:
                await asyncio.shield(_detached(box))


async def _detached(box: modal.Sandbox) -> None:
    """Close the client's connection to the sandbox's worker."""
    import modal

    try:
        await box.detach.aio()
    except (modal.exception.Error, OSError):  # a connection already gone has nothing left to close
        return


async def _call(what: str, call: Awaitable[T], timeout: float) -> T:
    """``call`` within ``timeout`` seconds; what Modal's client raises, as a :class:`ProviderFailure`
    (``retryable`` when asking again may succeed: no answer, a busy or failing service)."""
    import modal

    transient = (modal.exception.ConnectionError, modal.exception.ServiceError, modal.exception.InternalError,
                 modal.exception.ResourceExhaustedError, modal.exception.TimeoutError, ConnectionError)  # fmt: skip
    try:
        return await asyncio.wait_for(call, timeout)
    except asyncio.TimeoutError as exc:
        raise ProviderFailure(f"{what}: no answer in {timeout:g} s", retryable=True) from exc
    except Exception as exc:
        if not isinstance(exc, (modal.exception.Error, OSError)):
            raise
        raise ProviderFailure(
            f"{what}: {type(exc).__name__}: {exc}", retryable=isinstance(exc, transient)
        ) from exc
