"""The agent API: subclass ``RolloutAgentLoop``, implement ``get_tools`` and ``run``.

``run`` receives a ``RolloutContext`` that calls the policy model (``ctx.chat``), counts tool calls and
builds the final ``RolloutResult`` with metrics (``ctx.complete`` / ``ctx.error``)::

    class Calculator(RolloutAgentLoop):
        name = "calculator"

        def get_tools(self, request):
            return [ADD_TOOL]

        async def run(self, ctx):
            messages = list(ctx.request.messages)
            result = await ctx.chat(messages, **ctx.request.completion_params)
            messages.append(result.message)
            return ctx.complete(messages, reward=1.0)
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osmosis_ai.observe import tracing
from osmosis_ai.rollout.core.exceptions import AgentLoopDefinitionError
from osmosis_ai.rollout.core.llm_client import LLMClientProtocol
from osmosis_ai.rollout.core.schemas import (
    MessageDict,
    OpenAIFunctionToolSchema,
    RolloutMetrics,
    RolloutRequest,
)
from osmosis_ai.rollout.core.tracing import TraceWrite, safe_trace_filename, write_trace_line

if TYPE_CHECKING:
    from osmosis_ai.rollout.client import CompletionsResult
    from osmosis_ai.rollout.model_proxy import ModelRoute

logger = logging.getLogger(__name__)


def _has_abstract_methods(cls: type) -> bool:
    """Whether ``cls`` still has abstract methods.

    ``ABCMeta`` sets ``__abstractmethods__`` only after ``__init_subclass__`` has run, so compute it
    the same way by hand: names declared abstract anywhere in the MRO that still resolve to an
    abstract attribute on ``cls``.
    """
    candidates: set[str] = set()
    for klass in cls.__mro__:
        candidates.update(getattr(klass, "__abstractmethods__", ()))
        candidates.update(
            name for name, value in vars(klass).items() if getattr(value, "__isabstractmethod__", False)
        )
    return any(getattr(getattr(cls, name, None), "__isabstractmethod__", False) for name in candidates)


class RolloutAgentLoop(ABC):
    """Base class of an agent: a ``name``, the tools it offers, and the rollout logic.

    Concrete subclasses must define ``name`` (a non-blank string, inherited names count); abstract
    intermediate classes may leave it out.
    """

    name: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _has_abstract_methods(cls):
            return
        name = getattr(cls, "name", None)
        if not name:
            raise AgentLoopDefinitionError(
                f"Agent loop class {cls.__name__} must define a 'name' class attribute"
            )
        if not isinstance(name, str) or not name.strip():
            raise AgentLoopDefinitionError(
                f"Agent loop class {cls.__name__} has name={name!r}; 'name' must be a non-blank string"
            )

    @abstractmethod
    def get_tools(self, request: RolloutRequest) -> list[OpenAIFunctionToolSchema]:
        """Return the tools offered for ``request`` (schema objects or equivalent dicts)."""

    @abstractmethod
    async def run(self, ctx: RolloutContext) -> RolloutResult:
        """Run one rollout: call ``ctx.chat`` and tools, then return ``ctx.complete(...)``."""

    def get_default_tools(self) -> list[OpenAIFunctionToolSchema]:
        """Tools for a synthetic discovery request (for listings and validation)."""
        request = RolloutRequest(
            rollout_id="discovery", server_url="http://localhost", messages=[], completion_params={}
        )
        return self.get_tools(request)


@dataclass
class RolloutResult:
    """What ``run`` returns; posted to TrainGate's ``/v1/rollout/completed``."""

    status: str
    final_messages: list[MessageDict]
    finish_reason: str
    error_message: str | None = None
    metrics: RolloutMetrics | None = None
    reward: float | None = None


@dataclass
class RolloutContext:
    """Everything ``run`` needs for one rollout: the request, its tools and the LLM client.

    The server also passes ``_start_time`` (``time.time()`` at task start) and ``_debug_dir``.
    """

    request: RolloutRequest
    tools: list[OpenAIFunctionToolSchema]
    llm: LLMClientProtocol
    _start_time: float = field(default=0.0, repr=False)
    _tool_latency_ms: float = field(default=0.0, repr=False)
    _num_tool_calls: int = field(default=0, repr=False)
    _debug_dir: str | None = field(default=None, repr=False)
    _conversation: list[MessageDict] | None = field(default=None, init=False, repr=False)
    _route: ModelRoute | None = field(default=None, init=False, repr=False)

    async def chat(self, messages: list[MessageDict], **kwargs: Any) -> CompletionsResult:
        """Ask the policy model for the next message; ``messages`` is the full conversation so far."""
        result = await self.llm.chat_completions(messages, **kwargs)
        self._conversation = [*messages, result.message]
        return result

    @property
    def base_url(self) -> str:
        """This rollout's OpenAI-compatible base URL, for clients that cannot call ``ctx.chat``.

        ``POST {base_url}/chat/completions`` is answered by :meth:`chat` (the same trainer call,
        retries, metrics and recorded conversation); ``"stream": true`` gets the whole reply as one
        server-sent-event stream. Use it with :attr:`api_key`::

            client = openai.AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key)

        It is a loopback address of this process, valid until the rollout ends. Read it first inside
        ``run`` (on the rollout's event loop).
        """
        return self._model_route().base_url

    @property
    def api_key(self) -> str:
        """The key :attr:`base_url` takes (``Authorization: Bearer``); it opens this rollout's URL only."""
        return self._model_route().api_key

    def _model_route(self) -> ModelRoute:
        if self._route is None:
            from osmosis_ai.rollout.model_proxy import open_route

            self._route = open_route(self)
        return self._route

    def _end_model_route(self) -> BaseException | None:
        """Close :attr:`base_url` (the rollout is over); what a call through it last failed with."""
        route = self._route  # kept: the URL stays closed for an agent that goes on after its end
        if route is None:
            return None
        route.close()
        return route.failure

    @property
    def conversation(self) -> list[MessageDict]:
        """The conversation as last seen: the last ``chat`` messages plus its reply (a copy).

        Before the first successful ``chat`` this is the request's initial messages. The server sends
        it as ``final_messages`` when ``run`` fails, so partial work is not lost.
        """
        if self._conversation is None:
            return list(self.request.messages)
        return list(self._conversation)

    def complete(
        self, final_messages: list[MessageDict], finish_reason: str = "stop", reward: float | None = None
    ) -> RolloutResult:
        """A COMPLETED result with metrics taken now."""
        return RolloutResult(
            status="COMPLETED",
            final_messages=final_messages,
            finish_reason=finish_reason,
            metrics=self._build_metrics(),
            reward=reward,
        )

    def error(self, error_message: str, final_messages: list[MessageDict] | None = None) -> RolloutResult:
        """An ERROR result (``finish_reason="error"``) with metrics taken now."""
        return RolloutResult(
            status="ERROR",
            final_messages=final_messages or [],
            finish_reason="error",
            error_message=error_message,
            metrics=self._build_metrics(),
        )

    def record_tool_call(self, latency_ms: float = 0.0, name: str | None = None) -> None:
        """Count one tool call, of the tool ``name`` when given, that has just ended after ``latency_ms``
        milliseconds (with tracing on, an ``execute_tool`` span covering that time)."""
        self._num_tool_calls += 1
        self._tool_latency_ms += latency_ms
        tracing.tool_call(name, latency_ms)

    @property
    def debug_enabled(self) -> bool:
        """Whether ``log_event`` writes anything (a debug directory is set)."""
        return self._debug_dir is not None

    def log_event(self, event_type: str, **data: Any) -> TraceWrite:
        """Append ``{"event": event_type, "rollout_id": ..., **data}`` to this rollout's JSONL trace.

        A no-op unless debugging is enabled. On an event loop it never blocks: the write happens on a
        background thread; ``await ctx.log_event(...)`` if you need to know it reached the file.
        Called from a thread without a running event loop, it returns once the line is in the file.
        Values that are not JSON-serialisable are written with ``str()``.
        """
        path = self._get_debug_file_path()
        if path is None:
            return TraceWrite(None)
        line = json.dumps({"event": event_type, "rollout_id": self.request.rollout_id, **data}, default=str)
        write = write_trace_line(path, line)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop to keep free: a trace read right after the call has the line
            write.wait()
        return write

    def _get_debug_file_path(self) -> str | None:
        if self._debug_dir is None:
            return None
        return os.path.join(self._debug_dir, safe_trace_filename(self.request.rollout_id))

    def _build_metrics(self) -> RolloutMetrics:
        llm = self.llm.get_metrics()
        total = 0.0
        if self._start_time > 0:
            total = (time.time() - self._start_time) * 1000.0
        return RolloutMetrics(
            total_latency_ms=total,
            llm_latency_ms=llm.llm_latency_ms,
            tool_latency_ms=self._tool_latency_ms,
            num_llm_calls=llm.num_llm_calls,
            num_tool_calls=self._num_tool_calls,
            prompt_tokens=llm.prompt_tokens,
            response_tokens=llm.response_tokens,
        )
