"""OpenAI-compatible servers by base URL (vLLM, SGLang, a proxy), over the SDK's own HTTP client.

``POST {base URL}/chat/completions`` through the event loop's shared aiohttp pool of
:data:`MAX_CONNECTIONS` (:func:`osmosis_ai._http.shared_pool`): the body is the request as an OpenAI client sends it
(``model``, ``messages``, the other fields as given, ``extra_body`` merged in, never streamed), the
key a bearer token. The reply is the server's JSON. Failures become the same
:class:`~osmosis_ai.models.errors.ModelCallError` kinds LiteLLM's exceptions are classified into:
an error answer by its status and the server's words (``error.message``), no answer at all as a
``timeout`` or a ``connection`` failure, a reply that is not JSON as a ``server`` error.

One request per call: retrying is the caller's, on :func:`osmosis_ai._http.retrying`.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from osmosis_ai import _http
from osmosis_ai.models.errors import ModelCallError, clean_message, kind_of

MAX_CONNECTIONS = 1000
"""Connections of the model calls' pool: callers bound their own concurrency (a batch size, a pool's
limit), and the pool must not cap it below that silently; LiteLLM's own pool holds as many."""
MAX_REPLY_BYTES = 64 << 20
"""The largest chat completion read (token ids and logprobs of a long answer stay far below it)."""

# Fields of a LiteLLM call that are LiteLLM's own settings, not part of the request a server sees.
_NOT_SENT = frozenset(
    {"drop_params", "num_retries", "max_retries", "metadata", "extra_body", "extra_headers", "stream"}
)


def _error_text(body: bytes) -> str:
    """The server's own words in an error answer: OpenAI's ``error.message`` (and its ``code``),
    vLLM's older top-level ``message``, FastAPI's ``detail``, else the body itself."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            code = error.get("code")
            return error["message"] + (
                f" ({code})" if isinstance(code, str) and code not in error["message"] else ""
            )
        for value in (error, data.get("message"), data.get("detail")):
            if isinstance(value, str) and value.strip():
                return value
    return text


def _credentials(api_base: str, api_key: str) -> tuple[str, str]:
    """The base URL without a ``user:password@`` part, and the ``Authorization`` value: HTTP Basic with
    those credentials when the URL carries them (a proxy in front of the server), else the key as a
    Bearer token."""
    parts = urllib.parse.urlsplit(api_base)
    if parts.username is None:
        return api_base, f"Bearer {api_key}"
    pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    host = parts.netloc.rpartition("@")[2]
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, "Basic " + base64.b64encode(pair.encode()).decode()


async def acomplete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    api_base: str,
    api_key: str,
    timeout: float,
    params: Mapping[str, Any],
) -> Any:
    """One chat-completions request for ``model`` (the name the server serves); the reply's JSON.

    Raises:
        ModelCallError: the call failed (see the module docstring).
    """
    body: dict[str, Any] = {"model": model, "messages": messages}
    body.update((k, v) for k, v in params.items() if k not in _NOT_SENT)
    extra = params.get("extra_body")
    if isinstance(extra, Mapping):
        body.update(extra)
    api_base, authorization = _credentials(api_base, api_key)
    headers = {"Content-Type": "application/json", "Authorization": authorization}
    extra_headers = params.get("extra_headers")
    if isinstance(extra_headers, Mapping):
        headers.update({str(k): str(v) for k, v in extra_headers.items()})
    try:
        data = json.dumps(body, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise ModelCallError(f"the request cannot be sent as JSON: {exc}", kind="bad_request") from exc
    url = api_base.rstrip("/") + "/chat/completions"
    try:
        response = await _http.shared_pool(MAX_CONNECTIONS).request(
            "POST", url, body=data, headers=headers, timeout=timeout, max_bytes=MAX_REPLY_BYTES
        )
    except _http.TooLarge as exc:
        raise ModelCallError(f"{exc}: not a chat completion this SDK reads", kind="server") from exc
    except _http.NoAnswer as exc:
        kind = "timeout" if exc.timed_out else "connection"
        raise ModelCallError(clean_message(str(exc)), kind=kind) from exc
    if not 200 <= response.status < 300:
        text = _error_text(response.body)
        raise ModelCallError(
            clean_message(text) or f"HTTP {response.status}",
            kind=kind_of(text, response.status),
            status=response.status,
            retry_after=_http.parse_retry_after(response.retry_after),
        )
    try:
        return json.loads(response.body)
    except ValueError as exc:
        raise ModelCallError(f"the reply is not JSON: {exc}", kind="server") from exc
