"""0.2's ``osmosis_ai.auth.platform_client``: ``platform_request``, over :mod:`osmosis_ai.auth.client`."""

from __future__ import annotations

from typing import Any

from osmosis_ai.auth.client import EnvCredentials, authenticated_request
from osmosis_ai.auth.errors import AuthenticationExpiredError, PlatformAPIError
from osmosis_ai.auth.store import WorkspaceCredentials

__all__ = ["AuthenticationExpiredError", "PlatformAPIError", "platform_request"]


def platform_request(
    endpoint: str,
    method: str = "GET",
    data: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
    credentials: WorkspaceCredentials | EnvCredentials | None = None,
) -> dict[str, Any]:
    """Call the current Platform with ``credentials`` (default: the environment's token or the active
    workspace's) and return the JSON object it answers.

    Raises :class:`AuthenticationExpiredError` when not logged in or on HTTP 401 (those credentials,
    and only those, are then flagged invalid in the store) and :class:`PlatformAPIError` otherwise.
    """
    reply = authenticated_request(
        endpoint, credentials=credentials, method=method, data=data or None, headers=headers, timeout=timeout
    )
    if not isinstance(reply, dict):
        raise PlatformAPIError("the Osmosis Platform answered with a JSON value that is not an object")
    return reply
