"""Accepting rollouts and running them: the init fast path, the background task, the one terminal callback.

Init (:meth:`RolloutExecutor.start`) deduplicates by key, asks the agent for its tools, and returns
the 202 body as bytes. The tool list is serialized once and reused while the agent keeps returning an
equal list, so a typical init costs one request validation and one small byte concatenation.

Each accepted rollout runs in one task: wait for a concurrency slot, run ``agent.run(ctx)`` under the
per-rollout deadline, then POST exactly one terminal callback to TrainGate. The rules that fix the
0.2 defects:

* a COMPLETED result whose delivery fails is logged, never re-reported as ERROR (D2);
* on agent errors, timeouts and shutdown, ERROR carries the conversation as last seen and full
  metrics (D3); ``error_message`` is never empty;
* the record is created only after the init response exists and always moves to ``completed``
  when the task ends (D4);
* ``request_timeout_seconds`` bounds ``run`` and ``get_tools`` (D16, D21; see ``agent_tools`` for how
  ``get_tools`` is kept off the event loop);
* an optional queue limit rejects inits with 429 instead of queueing without bound (D26);
* shutdown drains in-flight rollouts for a grace period, then ends the rest with ERROR (D28).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.core.base import RolloutContext, RolloutResult
from osmosis_ai.rollout.server.agent_tools import GetToolsCaller, ToolsSerializer
from osmosis_ai.rollout.server.state import AppState, RolloutRecord

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.core.schemas import RolloutMetrics, RolloutRequest

logger = logging.getLogger(__name__)

_TERMINAL_STATUSES = ("COMPLETED", "ERROR")
SHUTDOWN_MESSAGE = "RolloutServer shut down before the rollout finished"


class InitRejected(Exception):
    """The server cannot take a rollout now; the route answers ``status`` (429 or 503)."""

    def __init__(self, status: int, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class _Outcome:
    """The fields of the one terminal callback of a rollout."""

    status: str
    final_messages: list[dict[str, Any]]
    finish_reason: str | None
    error_message: str | None = None
    metrics: RolloutMetrics | None = None
    reward: float | None = None


class _Deadline:
    """``async with _Deadline(seconds)`` cancels the body after ``seconds``; ``expired`` tells why it ended."""

    __slots__ = ("_handle", "_seconds", "_task", "expired")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[Any] | None = None
        self.expired = False

    def _fire(self) -> None:
        self.expired = True
        if self._task is not None:
            self._task.cancel()

    async def __aenter__(self) -> _Deadline:
        self._task = asyncio.current_task()
        self._handle = asyncio.get_running_loop().call_later(self._seconds, self._fire)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        if self._handle is not None:
            self._handle.cancel()
        if self.expired and exc_type is asyncio.CancelledError:
            if sys.version_info >= (3, 11) and self._task is not None:
                self._task.uncancel()
            raise TimeoutError
        return False


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def init_response_body(rollout_id: str, tools_json: bytes) -> bytes:
    """The 202 body ``{"rollout_id": ..., "tools": [...]}`` from pre-serialized tools."""
    return b'{"rollout_id":%s,"tools":%s}' % (json.dumps(rollout_id, ensure_ascii=False).encode(), tools_json)


class RolloutExecutor:
    """Starts rollouts for one app and reports their outcome to TrainGate."""

    def __init__(
        self,
        agent_loop: RolloutAgentLoop,
        state: AppState,
        *,
        settings: RolloutSettings,
        debug_dir: str | None = None,
        queue_limit: int | None = None,
        get_tools_in_thread: bool = False,
        tools_exclude_none: bool = False,
    ) -> None:
        self.agent_loop = agent_loop
        self.state = state
        self.settings = settings
        self.debug_dir = debug_dir
        self.queue_limit = queue_limit
        self.timeout = settings.server.request_timeout_seconds
        self.accepting = True
        self._draining = False
        self._serialize_tools = ToolsSerializer(exclude_none=tools_exclude_none)
        self._get_tools = GetToolsCaller(
            agent_loop.get_tools, self.timeout, always_thread=get_tools_in_thread
        )

    # -- init -----------------------------------------------------------------------------------------

    async def start(self, request: RolloutRequest) -> bytes:
        """Accept ``request`` (or answer a duplicate) and return the 202 body.

        Raises :class:`InitRejected` when draining or full; any other exception means get_tools failed
        or returned tools that are not valid tool schemas (the route answers 500).
        """
        state = self.state
        key = request.idempotency_key or request.rollout_id
        existing = state.lookup(key)
        if existing is not None:
            return await self._duplicate(existing, request)
        if not self.accepting:
            raise InitRejected(503, "the RolloutServer is shutting down; retry on another server")
        limit = self.queue_limit
        if limit is not None and state.active_count >= state.max_concurrent + limit:
            raise InitRejected(
                429,
                f"the RolloutServer is at capacity ({state.running} running, {state.queued_count} queued, "
                f"queue limit {limit}); retry later",
            )
        record = RolloutRecord(key, request.rollout_id)
        state.add(record)  # visible to duplicates while get_tools runs
        try:
            tools = await self._get_tools(request)
            record.tools_json = self._serialize_tools(tools)
            body = init_response_body(request.rollout_id, record.tools_json)
        except BaseException as exc:
            state.discard(record)
            if record.ready is not None:
                record.ready.set_exception(
                    exc if isinstance(exc, Exception) else RuntimeError("init cancelled")
                )
                record.ready.exception()  # retrieved here: waiters get it through await
            raise
        record.task = asyncio.get_running_loop().create_task(self._run(record, request, tools))
        if record.ready is not None:
            record.ready.set_result(None)
        logger.debug("rollout %s accepted", key)
        return body

    async def _duplicate(self, record: RolloutRecord, request: RolloutRequest) -> bytes:
        # 0.2 semantics (kept for compatibility, defect D7): the cached answer carries the ORIGINAL
        # rollout_id even when the duplicate names another one; bodies are not compared.
        if record.tools_json is None:
            if record.ready is None:
                record.ready = asyncio.get_running_loop().create_future()
            await asyncio.shield(record.ready)
        if request.rollout_id != record.rollout_id:
            logger.warning(
                "duplicate init for key %r carries rollout_id %r; answering with the original rollout %r",
                record.key,
                request.rollout_id,
                record.rollout_id,
            )
        assert record.tools_json is not None
        return init_response_body(record.rollout_id, record.tools_json)

    # -- background task ------------------------------------------------------------------------------

    async def _run(self, record: RolloutRecord, request: RolloutRequest, tools: Any) -> None:
        state = self.state
        try:
            try:
                await state.semaphore.acquire()
            except asyncio.CancelledError:
                if not self._draining:
                    raise
                await self._report(request, None, _Outcome("ERROR", [], "error", SHUTDOWN_MESSAGE))
                return
            state.running += 1
            try:
                await self._execute(request, tools)
            finally:
                state.running -= 1
                state.semaphore.release()
        finally:
            state.mark_completed(record)

    async def _execute(self, request: RolloutRequest, tools: Any) -> None:
        client = OsmosisLLMClient(
            request.server_url, request.rollout_id, api_key=request.api_key, settings=self.settings.client
        )
        async with client:
            ctx = RolloutContext(
                request=request,
                tools=tools,
                llm=client,
                _start_time=time.monotonic(),
                _debug_dir=self.debug_dir,
            )
            outcome = await self._outcome(ctx)
            await self._report(request, client, outcome, ctx)

    async def _outcome(self, ctx: RolloutContext) -> _Outcome:
        """Run the agent and turn whatever happens into the terminal callback's fields."""
        rollout_id = ctx.request.rollout_id
        deadline = _Deadline(self.timeout)
        try:
            async with deadline:
                result = await self.agent_loop.run(ctx)
        except asyncio.CancelledError:
            if not self._draining:
                raise
            return self._failure(ctx, SHUTDOWN_MESSAGE)
        except Exception as exc:
            if deadline.expired and isinstance(exc, TimeoutError):
                message = f"rollout exceeded the deadline of {self.timeout:g} s (request_timeout_seconds)"
                logger.error("rollout %s: %s", rollout_id, message)
                return self._failure(ctx, message)
            logger.exception("agent loop failed for rollout %s", rollout_id)
            return self._failure(ctx, _error_text(exc))
        return self._from_result(ctx, result)

    @staticmethod
    def _failure(ctx: RolloutContext, message: str) -> _Outcome:
        return _Outcome("ERROR", ctx.conversation, "error", message, ctx._build_metrics())

    def _from_result(self, ctx: RolloutContext, result: Any) -> _Outcome:
        if not isinstance(result, RolloutResult):
            return self._failure(ctx, f"run() returned {type(result).__name__}, expected a RolloutResult")
        status = result.status
        if status not in _TERMINAL_STATUSES:
            return self._failure(
                ctx, f"run() returned the invalid status {status!r}; use 'COMPLETED' or 'ERROR'"
            )
        error_message = result.error_message
        if status == "ERROR" and not error_message:
            error_message = "the agent loop reported an error without a message"
        return _Outcome(
            str(getattr(status, "value", status)),
            result.final_messages,
            result.finish_reason,
            error_message,
            result.metrics,
            result.reward,
        )

    async def _report(
        self,
        request: RolloutRequest,
        client: Any,
        outcome: _Outcome,
        ctx: RolloutContext | None = None,
    ) -> None:
        """POST the one terminal callback. Delivery failures are logged, never re-reported (D2)."""
        if client is None:
            async with OsmosisLLMClient(
                request.server_url, request.rollout_id, api_key=request.api_key, settings=self.settings.client
            ) as fresh:
                await self._report(request, fresh, outcome, ctx)
            return
        try:
            await self._post(client, outcome)
        except (ValueError, TypeError) as exc:
            # Raised before anything was sent: the agent's result does not fit RolloutResponse
            # (e.g. a reward that is not a number). Report that instead, once.
            if outcome.status != "COMPLETED" or ctx is None:
                logger.error("rollout %s: cannot build the terminal callback: %s", request.rollout_id, exc)
                return
            message = f"the agent loop returned an invalid result: {_error_text(exc)}"
            await self._report(request, client, self._failure(ctx, message))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error(
                "rollout %s: delivering the %s callback to %s failed: %s",
                request.rollout_id,
                outcome.status,
                request.server_url,
                _error_text(exc),
            )
        else:
            logger.debug("rollout %s reported %s", request.rollout_id, outcome.status)

    @staticmethod
    async def _post(client: Any, outcome: _Outcome) -> None:
        await client.complete_rollout(
            status=outcome.status,
            final_messages=outcome.final_messages,
            finish_reason=outcome.finish_reason,
            error_message=outcome.error_message,
            metrics=outcome.metrics,
            reward=outcome.reward,
        )

    # -- shutdown -------------------------------------------------------------------------------------

    async def drain(self, grace_seconds: float, callback_timeout_seconds: float) -> tuple[int, int]:
        """Stop accepting, let rollouts finish for ``grace_seconds``, then end the rest with ERROR.

        Returns (finished during the grace period, ended by shutdown).
        """
        self.accepting = False
        tasks = [record.task for record in list(self.state.active.values()) if record.task is not None]
        if not tasks:
            return 0, 0
        if grace_seconds > 0:
            await asyncio.wait(tasks, timeout=grace_seconds)
        remaining = [task for task in tasks if not task.done()]
        if remaining:
            logger.warning(
                "shutting down with %d rollouts unfinished; sending them ERROR callbacks", len(remaining)
            )
            self._draining = True
            for task in remaining:
                task.cancel()
            _, stuck = await asyncio.wait(remaining, timeout=callback_timeout_seconds)
            for task in stuck:
                task.cancel()
            if stuck:
                await asyncio.wait(stuck, timeout=1.0)
        return len(tasks) - len(remaining), len(remaining)
