"""Stepping through a row's model calls: a client wrapper that reports each step and can stop the row.

:class:`InteractiveLLMClient` wraps the run's model client (an
:class:`~osmosis_ai.runs.executors.model_client.ExternalLLMClient`). Before each call it hands the
outgoing conversation to ``on_messages_updated`` (so a viewer can show the tool results the agent
appended); ``on_tools`` hears the row's tools when the runner offers them; after each call it hands the model's answer to ``on_step`` as an
:class:`InteractiveStep`. When ``on_step`` answers ``False`` the row is aborted: that call and
every later one raise :class:`InterruptedError` inside the agent, until :meth:`reset_metrics`
starts the next row. Both callbacks may be plain functions or coroutine functions; they run on
the event loop, so one that waits for a person must wait without blocking it (``osmosis test -i``
reads the console in a thread).

Everything else (tools, metrics, retries, closing: ``async with`` enters and leaves the wrapped
client) is the wrapped client's.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]
StepCallback = Callable[["InteractiveStep"], "bool | Awaitable[bool]"]
MessagesCallback = Callable[[list[Message]], "Awaitable[None] | None"]
ToolsCallback = Callable[[list[Message]], None]

ABORTED = "aborted by user"


@dataclass(frozen=True)
class InteractiveStep:
    """One model answer within a row: the turn (1-based), the message, its tool calls (``None``
    when it made none) and why it stopped."""

    turn: int
    step_type: str
    message: Message | None = None
    tool_calls: list[Message] | None = None
    finish_reason: str | None = None


def parse_arguments(arguments: Any) -> Any:
    """A tool call's ``arguments``: the decoded JSON when it is a JSON string, else the value as given."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class InteractiveLLMClient:
    """``wrapped_client`` with every model answer reported to ``on_step`` (see the module docstring)."""

    def __init__(
        self,
        wrapped_client: Any,
        on_step: StepCallback,
        on_messages_updated: MessagesCallback | None = None,
        on_tools: ToolsCallback | None = None,
    ) -> None:
        self.wrapped = wrapped_client
        self.on_step = on_step
        self.on_messages_updated = on_messages_updated
        self.on_tools = on_tools
        self.turn = 0
        self.aborted = False
        self.tools: list[Message] = []

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class does not define: display_name, retries, failed_calls...
        return getattr(self.wrapped, name)

    def set_tools(self, tools: list[Any] | None) -> None:
        self.wrapped.set_tools(tools)
        self.tools = [
            t.model_dump(exclude_none=True) if hasattr(t, "model_dump") else dict(t) for t in tools or []
        ]
        if self.on_tools is not None:
            self.on_tools(list(self.tools))

    def clear_tools(self) -> None:
        self.wrapped.clear_tools()

    def reset_metrics(self) -> None:
        """Start a new row: the wrapped client's counters, the turn count and the abort flag all reset."""
        self.wrapped.reset_metrics()
        self.turn = 0
        self.aborted = False
        self.tools = []

    def get_metrics(self) -> Any:
        return self.wrapped.get_metrics()

    async def chat_completions(self, messages: list[Message], **kwargs: Any) -> Any:
        if self.aborted:
            raise InterruptedError(ABORTED)
        self.turn += 1
        if self.on_messages_updated is not None:
            await _settle(self.on_messages_updated(list(messages)))
        result = await self.wrapped.chat_completions(messages, **kwargs)
        message = dict(result.message)
        step = InteractiveStep(
            turn=self.turn,
            step_type="llm_response",
            message=message,
            tool_calls=list(message["tool_calls"]) if message.get("tool_calls") else None,
            finish_reason=result.finish_reason,
        )
        if not await _settle(self.on_step(step)):
            self.aborted = True
            raise InterruptedError(ABORTED)
        return result

    async def close(self) -> None:
        await self.wrapped.close()

    async def __aenter__(self) -> InteractiveLLMClient:
        await self.wrapped.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.wrapped.__aexit__(*exc_info)
