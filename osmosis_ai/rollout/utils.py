"""Small, total helpers over OpenAI-style message dicts: they never raise on odd input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the helpers need only the standard library: the run reports read records with them
    from osmosis_ai.rollout.core.schemas import MessageDict

TOOL_ERROR_PREFIX = "Error: "
"""How a tool message reporting a failure begins (``create_tool_error_result``)."""


def parse_tool_calls(assistant_message: MessageDict) -> list[dict[str, Any]]:
    """The message's ``tool_calls`` list, or ``[]`` when missing, null or not a list."""
    tool_calls = assistant_message.get("tool_calls")
    return tool_calls if isinstance(tool_calls, list) else []


def normalize_stop(stop: Any) -> list[str] | None:
    """``None`` -> ``None``; a string -> ``[string]``; a list -> its items as strings; anything else -> ``None``."""
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list):
        return [str(item) for item in stop]
    return None


def get_message_content(message: MessageDict) -> str:
    """The message's text content, or ``""`` when it is missing or not a string."""
    content = message.get("content")
    return content if isinstance(content, str) else ""


def get_message_role(message: MessageDict) -> str:
    """The message's role, or ``"unknown"`` when it is missing or not a string."""
    role = message.get("role")
    return role if isinstance(role, str) else "unknown"


def is_assistant_message(message: MessageDict) -> bool:
    """Whether the role is ``assistant``."""
    return get_message_role(message) == "assistant"


def is_tool_message(message: MessageDict) -> bool:
    """Whether the role is ``tool``."""
    return get_message_role(message) == "tool"


def is_tool_error(message: Mapping[str, Any]) -> bool:
    """Whether the message is a tool message reporting a failure (``"Error: ..."``): the tool raised,
    timed out, or rejected its arguments."""
    content = message.get("content")
    return (
        message.get("role") == "tool" and isinstance(content, str) and content.startswith(TOOL_ERROR_PREFIX)
    )


def is_user_message(message: MessageDict) -> bool:
    """Whether the role is ``user``."""
    return get_message_role(message) == "user"


def count_messages_by_role(messages: list[MessageDict]) -> dict[str, int]:
    """``{role: count}`` in first-seen order; roles that are not strings count as ``"unknown"``."""
    counts: dict[str, int] = {}
    for message in messages:
        role = get_message_role(message)
        counts[role] = counts.get(role, 0) + 1
    return counts
