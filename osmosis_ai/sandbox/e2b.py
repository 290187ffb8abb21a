"""The E2B provider (``run(..., provider="e2b")``), over E2B's public HTTP APIs with the SDK's one
HTTP client (:mod:`osmosis_ai._http`), not E2B's SDK.

The subset used (E2B API and envd as documented in 2026; docs/design/sandbox.md):

* control plane, ``https://api.<domain>`` with ``X-API-Key``: ``POST /sandboxes`` (``templateID``,
  ``timeout`` = the time to live, ``metadata`` carrying the run's idempotency key,
  ``allow_internet_access``, ``secure``), ``GET /v2/sandboxes?metadata=osmosis_key%3D<key>`` (the
  sandbox a lost create made), ``POST /sandboxes/{id}/connect`` (its envd token),
  ``DELETE /sandboxes/{id}``;
* envd, the sandbox's own daemon at ``https://49983-<id>.<domain>`` with ``X-Access-Token``:
  ``POST /files?path=`` (multipart upload), ``GET /files?path=`` (download), and the Connect RPC
  ``process.Process/Start`` (a server stream of JSON envelopes: start, stdout/stderr data, end).

Settings: ``E2B_API_KEY`` (required), ``E2B_DOMAIN`` (default ``e2b.app``), ``E2B_API_URL`` and
``E2B_SANDBOX_URL`` (the control plane and envd at other addresses: a proxy, a self-hosted
deployment, the tests' stand-in), ``OSMOSIS_E2B_TEMPLATE`` (default ``base``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import secrets
import signal
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from osmosis_ai._http import NoAnswer, Response, is_retryable_status, shared_pool
from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox.remote import Executed, ProviderFailure, said

ENVD_PORT = 49983
KEY_FIELD = "osmosis_key"
_SIGNALS = {"killed": signal.SIGKILL, "segmentation fault": signal.SIGSEGV, "aborted": signal.SIGABRT,
            "terminated": signal.SIGTERM, "interrupt": signal.SIGINT, "bus error": signal.SIGBUS}  # fmt: skip


class E2BProvider:
    """E2B sandboxes (see the module docstring); arguments override the environment's settings."""

    name = "e2b"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        domain: str | None = None,
        api_url: str | None = None,
        sandbox_url: str | None = None,
        template: str | None = None,
    ) -> None:
        key = api_key or os.environ.get("E2B_API_KEY")
        if not key:
            raise SandboxSettingError("the e2b sandbox provider needs an API key: set E2B_API_KEY")
        self.api_key = key
        self.domain = domain or os.environ.get("E2B_DOMAIN") or "e2b.app"
        self.api_url = (api_url or os.environ.get("E2B_API_URL") or f"https://api.{self.domain}").rstrip("/")
        self.sandbox_url = sandbox_url or os.environ.get("E2B_SANDBOX_URL") or None
        self.template = template or os.environ.get("OSMOSIS_E2B_TEMPLATE") or "base"
        self._tokens: dict[str, str | None] = {}

    async def _call(
        self, method: str, url: str, *, timeout: float, body: bytes | None = None,
        headers: Mapping[str, str] | None = None, ok: tuple[int, ...] = (200, 201, 204),
    ) -> Response:  # fmt: skip
        try:
            answer = await shared_pool().request(
                method, url, body=body, headers=headers, timeout=timeout, connect_timeout=min(timeout, 10.0)
            )
        except NoAnswer as exc:
            raise ProviderFailure(f"{method} {_path(url)}: no answer ({exc})", retryable=True) from None
        if answer.status not in ok:
            raise ProviderFailure(
                f"{method} {_path(url)} answered HTTP {answer.status}: {said(answer.body)}",
                retryable=is_retryable_status(answer.status),
            )
        return answer

    def _api_headers(self, key: str | None = None) -> dict[str, str]:
        headers = {"X-API-Key": self.api_key, "Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return headers

    def _envd(self, sandbox: str, path: str) -> tuple[str, dict[str, str]]:
        base = self.sandbox_url or f"https://{ENVD_PORT}-{sandbox}.{self.domain}"
        headers = {"E2b-Sandbox-Id": sandbox, "E2b-Sandbox-Port": str(ENVD_PORT)}
        token = self._tokens.get(sandbox)
        if token:
            headers["X-Access-Token"] = token
        return f"{base.rstrip('/')}{path}", headers

    def _keep(self, answer: Response) -> str:
        try:
            data = json.loads(answer.body)
            sandbox = str(data["sandboxID"])
        except (ValueError, KeyError, TypeError):
            raise ProviderFailure("the create answer has no sandboxID", retryable=False) from None
        self._tokens[sandbox] = data.get("envdAccessToken")
        return sandbox

    async def create(self, *, key: str, ttl: float, network: bool, timeout: float) -> str:
        body = {"templateID": self.template, "timeout": math.ceil(ttl), "metadata": {KEY_FIELD: key},
                "allow_internet_access": network, "secure": True}  # fmt: skip
        answer = await self._call("POST", f"{self.api_url}/sandboxes", body=json.dumps(body).encode(),
                                  headers=self._api_headers(key), timeout=timeout)  # fmt: skip
        return self._keep(answer)

    async def find(self, key: str, *, timeout: float) -> str | None:
        query = urllib.parse.urlencode({"metadata": f"{KEY_FIELD}={key}"})
        answer = await self._call("GET", f"{self.api_url}/v2/sandboxes?{query}", headers=self._api_headers(),
                                  timeout=timeout)  # fmt: skip
        try:
            listed = [str(item["sandboxID"]) for item in json.loads(answer.body)]
        except (ValueError, KeyError, TypeError):
            raise ProviderFailure("the sandbox listing is not a list of sandboxes", retryable=False) from None
        if not listed:
            return None
        connected = await self._call("POST", f"{self.api_url}/sandboxes/{listed[0]}/connect",
                                     body=b'{"timeout": 0}', headers=self._api_headers(), timeout=timeout)  # fmt: skip
        return self._keep(connected)

    async def upload(self, sandbox: str, path: str, data: bytes, *, timeout: float) -> None:
        boundary = secrets.token_hex(16)
        name = path.rsplit("/", 1)[-1]
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        url, headers = self._envd(sandbox, "/files?" + urllib.parse.urlencode({"path": path}))
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
        await self._call("POST", url, body=body, headers=headers, timeout=timeout)

    async def download(self, sandbox: str, path: str, *, timeout: float) -> bytes | None:
        url, headers = self._envd(sandbox, "/files?" + urllib.parse.urlencode({"path": path}))
        answer = await self._call("GET", url, headers=headers, timeout=timeout, ok=(200, 404))
        return None if answer.status == 404 else answer.body

    async def execute(
        self, sandbox: str, argv: Sequence[str], env: Mapping[str, str], *, timeout: float
    ) -> Executed:
        request = {"process": {"cmd": argv[0], "args": list(argv[1:]), "envs": dict(env)}}
        message = json.dumps(request).encode()
        url, headers = self._envd(sandbox, "/process.Process/Start")
        headers |= {"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
        body = b"\x00" + len(message).to_bytes(4, "big") + message
        try:
            answer = await asyncio.wait_for(
                self._call("POST", url, body=body, headers=headers, timeout=timeout + 5), timeout
            )
        except asyncio.TimeoutError:
            return Executed(None, b"", b"", timed_out=True)
        return _events(answer.body)

    async def delete(self, sandbox: str, *, timeout: float) -> None:
        await self._call("DELETE", f"{self.api_url}/sandboxes/{sandbox}", headers=self._api_headers(),
                         timeout=timeout, ok=(200, 204, 404))  # fmt: skip
        self._tokens.pop(sandbox, None)


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path


def _events(stream: bytes) -> Executed:
    """The process's output and end, read from a Connect server stream of JSON envelopes."""
    stdout, stderr = bytearray(), bytearray()
    end: dict[str, Any] | None = None
    offset = 0
    while offset + 5 <= len(stream):
        flags, size = stream[offset], int.from_bytes(stream[offset + 1 : offset + 5], "big")
        payload = stream[offset + 5 : offset + 5 + size]
        offset += 5 + size
        try:
            message = json.loads(payload or b"{}")
        except ValueError:
            raise ProviderFailure("envd sent an envelope that is not JSON", retryable=False) from None
        if flags & 0x02:  # the end of the stream, with the RPC's error if it failed
            if message.get("error"):
                error = message["error"]
                raise ProviderFailure(
                    f"envd: {error.get('code', 'error')}: {error.get('message', '')}".rstrip(": "),
                    retryable=error.get("code") in ("unavailable", "resource_exhausted"),
                )
            continue
        event = message.get("event") or {}
        data = event.get("data") or {}
        for stream_name, kept in (("stdout", stdout), ("stderr", stderr)):
            if data.get(stream_name):
                kept += base64.b64decode(data[stream_name])
        if "end" in event:
            end = event["end"] or {}
    if end is None:
        raise ProviderFailure("envd's stream ended without the process's end", retryable=False)
    return Executed(_exit_code(end), bytes(stdout), bytes(stderr), timed_out=False)


def _exit_code(end: Mapping[str, Any]) -> int | None:
    """The exit status, ``128 + n`` for death by signal ``n`` (envd says ``signal: killed``); proto3's
    JSON leaves out zero values, so a missing ``exitCode`` is 0."""
    status = str(end.get("status") or "")
    if status.startswith("signal: "):
        number = _SIGNALS.get(status[len("signal: ") :])
        return None if number is None else 128 + number
    return int(end.get("exitCode") or 0)
