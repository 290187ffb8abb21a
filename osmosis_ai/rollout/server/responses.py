"""Raw ASGI helpers for the init hot path: read a bounded body, send prebuilt JSON, shape 422 errors.

The 422 body has FastAPI's shape (``{"detail": [{"type", "loc": ["body", ...], "msg", "input", "ctx"}]}``)
so clients written against osmosis-ai 0.2, whose init route was a FastAPI endpoint, see no difference.
Building it is the slow path; the fast path never touches these functions beyond ``send_json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyTooLarge(Exception):
    """The request body exceeds the configured limit."""


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes = b"application/json",
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send a complete response in two ASGI messages."""
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if extra_headers:
        headers.extend(extra_headers)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, payload: Any, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Send ``payload`` as compact JSON (non-ASCII kept as UTF-8, like FastAPI's JSONResponse)."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    await send_bytes(send, status, body, extra_headers=extra_headers)


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower-case bytes), without building a Headers object."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


async def read_body(scope: Scope, receive: Receive, max_bytes: int) -> bytes:
    """The whole request body; :class:`BodyTooLarge` as soon as it exceeds ``max_bytes``."""
    declared = header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > max_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _jsonable(value: Any) -> Any:
    """FastAPI's ``jsonable_encoder`` turns exceptions inside ``ctx`` into ``{}``; do the same."""
    if isinstance(value, BaseException):
        return {}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def validation_errors(body: bytes, error: ValidationError) -> list[dict[str, Any]]:
    """The 422 ``detail`` list FastAPI would produce, built from the ``model_validate_json`` failure.

    The body is not parsed again: a second parser could fail differently (0.2's ``json.loads``
    overflowed the stack on deeply nested input, a 500) and would double the cost of bad input.
    """
    if not body:
        return [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
    details = []
    for item in error.errors(include_url=False):
        kind, loc, ctx = item["type"], item["loc"], item.get("ctx")
        if kind == "json_invalid":
            reason = str((ctx or {}).get("error", item["msg"]))
            details.append(
                {
                    "type": kind,
                    "loc": ["body", _json_error_offset(body, reason)],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": reason},
                }
            )
            continue
        if kind == "model_type" and not loc:  # valid JSON, but not an object
            kind, ctx = "model_attributes_type", None
            item["msg"] = "Input should be a valid dictionary or object to extract fields from"
        detail: dict[str, Any] = {
            "type": kind,
            "loc": ["body", *loc],
            "msg": item["msg"],
            "input": _jsonable(item.get("input")),
        }
        if ctx is not None:
            detail["ctx"] = _jsonable(ctx)
        details.append(detail)
    return details


_LINE_COLUMN = re.compile(r"at line (\d+) column (\d+)")


def _json_error_offset(body: bytes, reason: str) -> int:
    """The byte offset of pydantic's ``at line L column C`` (FastAPI reports ``json.loads``' offset)."""
    match = _LINE_COLUMN.search(reason)
    if match is None:
        return 0
    line, column = int(match[1]), int(match[2])
    start = 0
    for _ in range(line - 1):
        start = body.find(b"\n", start) + 1
        if start == 0:
            return 0
    return min(start + max(column - 1, 0), len(body))
