"""Accepting rollouts and running them: the init path, the background task, the one terminal callback.

Init (:meth:`RolloutExecutor.start`) deduplicates by key, asks the agent for its tools, and returns
the 202 body as bytes. The tool list is validated once and reused while the agent keeps returning an
equal list.

Each accepted rollout runs in one task: wait for a concurrency slot, run ``agent.run(ctx)`` under the
per-rollout deadline, then POST exactly one terminal callback to TrainGate. The rules:

* a COMPLETED result whose delivery fails is logged, never re-reported as ERROR: TrainGate may have
  recorded it, and a second, contradicting terminal callback would be worse than a missing one;
* on agent errors, timeouts and shutdown, ERROR carries the conversation as last seen and full
  metrics, so partial work reaches the trainer; ``error_message`` is never empty;
* the record is created only after the init response exists and always moves to ``completed``
  when the task ends, so a failed init can be retried and no record leaks;
* ``request_timeout_seconds`` bounds ``run`` and ``get_tools``, so a hung agent cannot hold a
  concurrency slot forever;
* an optional queue limit rejects inits with 429 instead of queueing without bound;
* shutdown drains in-flight rollouts for a grace period, then ends the rest with ERROR.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.core.base import RolloutContext, RolloutResult
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError, RolloutValueError
from osmosis_ai.rollout.core.schemas import InitResponse
from osmosis_ai.rollout.server.agent_tools import GetToolsCaller, ToolsCache
from osmosis_ai.rollout.server.state import AppState, RolloutRecord

if TYPE_CHECKING:
    from osmosis_ai.rollout.config.settings import RolloutClientSettings, RolloutSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema, RolloutMetrics, RolloutRequest

logger = logging.getLogger(__name__)

_TERMINAL_STATUSES = ("COMPLETED", "ERROR")
_UNWIND_SHARE = 0.1  # of the shutdown callback budget
SHUTDOWN_MESSAGE = "RolloutServer shut down before the rollout finished"
DRAINING_MESSAGE = "the RolloutServer is shutting down; retry on another server"


class _InitRefused(Exception):
    """The server cannot take a rollout now; the route answers ``status`` (429 or 503) with ``Retry-After``."""

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
    """``async with _Deadline(seconds)`` cancels the body after ``seconds``; ``expired`` tells why it ended.

    ``asyncio.timeout`` semantics on every supported Python (3.10 has no ``asyncio.timeout``): an expired
    body that was cancelled raises ``TimeoutError``; on 3.11+ our cancel request is withdrawn
    (``uncancel``), and a cancel someone else requested too (shutdown) propagates. A body that produced
    its result although the deadline fired keeps it: a cancel still pending (requested after the body's
    last suspension) is taken here, so it cannot end the caller at its next await instead.
    """

    __slots__ = ("_handle", "_seconds", "_task", "expired")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds  # None: no deadline
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[Any] | None = None
        self.expired = False

    def _fire(self) -> None:
        self.expired = True
        if self._task is not None:
            self._task.cancel()

    async def __aenter__(self) -> _Deadline:
        self._task = asyncio.current_task()
        if self._seconds is not None:
            self._handle = asyncio.get_running_loop().call_later(self._seconds, self._fire)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, _: object
    ) -> bool:
        if self._handle is not None:
            self._handle.cancel()
        if not self.expired:
            return False
        others = 0  # cancel requests besides ours (3.10 cannot tell)
        if sys.version_info >= (3, 11) and self._task is not None:
            others = self._task.uncancel()
        if exc_type is asyncio.CancelledError:
            if others:
                return False
            raise TimeoutError from exc
        if exc_type is None:  # the result exists: deliver it, even if shutdown's cancel lands here too
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)
        return False


def _pool_for(client: RolloutClientSettings, max_concurrent: int) -> RolloutClientSettings:
    """Client settings whose shared pool has a connection for every rollout allowed to run at once.

    One pool serves the whole process, so a pool smaller than ``max_concurrent`` would queue
    rollouts' chat calls behind each other.
    """
    if client.max_connections >= max_concurrent:
        return client
    return client.model_copy(update={"max_connections": max_concurrent})


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


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
        self.timeout = settings.server.request_timeout_seconds or None  # 0: no deadline
        self.client_settings = _pool_for(settings.client, state.max_concurrent)
        self.accepting = True
        self._draining = False  # True once shutdown cancels rollouts: a cancelled rollout reports ERROR
        self._callback_deadline: float | None = None
        self.tools_exclude_none = tools_exclude_none
        self._validate_tools = ToolsCache()
        self._get_tools = GetToolsCaller(
            agent_loop.get_tools, self.timeout, always_thread=get_tools_in_thread
        )

    # -- init -----------------------------------------------------------------------------------------

    async def start(self, request: RolloutRequest) -> bytes:
        """Accept ``request`` (or answer a duplicate) and return the 202 body.

        Raises :class:`_InitRefused` when draining or full; any other exception means get_tools failed
        or returned tools that are not valid tool schemas (the route answers 500).
        """
        state = self.state
        key = request.idempotency_key or request.rollout_id
        existing = state.lookup(key)
        if existing is not None:
            return await self._duplicate(existing, request)
        if not self.accepting:
            raise _InitRefused(503, DRAINING_MESSAGE)
        limit = self.queue_limit
        if limit is not None and state.active_count >= state.max_concurrent + limit:
            raise _InitRefused(
                429,
                f"the RolloutServer is at capacity ({state.running} running, {state.queued_count} queued, "
                f"queue limit {limit}); retry later",
            )
        record = RolloutRecord(key, request.rollout_id)
        state.add(record)  # visible to duplicates while get_tools runs
        try:
            tools = await self._get_tools(request)
            if not self.accepting:  # shutdown began while get_tools ran: nothing would report this rollout
                raise _InitRefused(503, DRAINING_MESSAGE)
            record.tools = self._validate_tools(tools)
            body = self._init_body(request.rollout_id, record.tools)
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
        # The cached answer carries the ORIGINAL rollout_id even when the duplicate names another
        # one, and bodies are not compared: the key alone identifies the rollout (protocol compatibility).
        if record.tools is None:
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
        assert record.tools is not None
        return self._init_body(record.rollout_id, record.tools)

    def _init_body(self, rollout_id: str, tools: list[OpenAIFunctionToolSchema]) -> bytes:
        response = InitResponse(rollout_id=rollout_id, tools=tools)
        return response.model_dump_json(exclude_none=self.tools_exclude_none).encode()

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
            state.finish(record)

    async def _execute(self, request: RolloutRequest, tools: Any) -> None:
        client = OsmosisLLMClient(
            request.server_url, request.rollout_id, api_key=request.api_key, settings=self.client_settings
        )
        async with client:
            ctx = RolloutContext(
                request=request,
                tools=tools,
                llm=client,
                _start_time=time.time(),
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
        """POST the one terminal callback of the rollout.

        Delivery failures are logged, never re-reported (see the module docstring). A callback that cannot be built (nothing
        was sent) is replaced by one ERROR: with the conversation and metrics when those can be sent,
        else a bare one.
        """
        if client is None:
            async with OsmosisLLMClient(
                request.server_url, request.rollout_id, api_key=request.api_key, settings=self.client_settings
            ) as fresh:
                await self._report(request, fresh, outcome, ctx)
            return
        problem = await self._deliver(request, client, outcome)
        if problem is None:
            return
        fallbacks = [self._failure(ctx, problem)] if ctx is not None else []
        fallbacks.append(_Outcome("ERROR", [], "error", problem))
        for fallback in fallbacks:
            if await self._deliver(request, client, fallback) is None:
                return

    async def _deliver(self, request: RolloutRequest, client: Any, outcome: _Outcome) -> str | None:
        """POST ``outcome``; ``None`` once sent (or its delivery failed), else why it could not be built."""
        rollout_id = request.rollout_id
        try:
            await self._post(client, outcome)
        except RolloutValueError as exc:  # the fields do not fit RolloutResponse; raised before sending
            logger.error("rollout %s: cannot build the %s callback: %s", rollout_id, outcome.status, exc)
            return f"the agent loop returned an invalid result: {_error_text(exc)}"
        except OsmosisRolloutError as exc:
            logger.error(
                "rollout %s: delivering the %s callback to %s failed: %s",
                rollout_id,
                outcome.status,
                request.server_url,
                _error_text(exc),
            )
        except Exception as exc:  # a defect, not a delivery failure: the transport wraps its own errors
            logger.exception("rollout %s: the %s callback could not be built", rollout_id, outcome.status)
            return f"the RolloutServer could not build the {outcome.status} callback: {type(exc).__name__}"
        else:
            logger.debug("rollout %s reported %s", rollout_id, outcome.status)
        return None

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

        From then on every cancelled rollout reports ERROR (``SHUTDOWN_MESSAGE``), and delivering those
        callbacks gets ``callback_timeout_seconds`` in all (see :meth:`callback_time_left`); stragglers
        are cancelled again and end without one (logged). Returns (finished during the grace period,
        ended by shutdown).
        """
        self.accepting = False
        tasks = self._unfinished()
        if tasks and grace_seconds > 0:
            await asyncio.wait(tasks, timeout=grace_seconds)
        self._draining = True
        self._callback_deadline = asyncio.get_running_loop().time() + callback_timeout_seconds
        remaining = [task for task in tasks if not task.done()]
        if not remaining:
            return len(tasks), 0
        logger.warning(
            "shutting down with %d rollouts unfinished; sending them ERROR callbacks", len(remaining)
        )
        for task in remaining:
            task.cancel()
        unwind = callback_timeout_seconds * _UNWIND_SHARE  # kept for cancelled callbacks to unwind
        _, stuck = await asyncio.wait(remaining, timeout=max(self.callback_time_left() - unwind, 0))
        if stuck:
            logger.error(
                "%d rollouts did not deliver their ERROR callback within %g s; ending them without one",
                len(stuck),
                callback_timeout_seconds,
            )
            for task in stuck:
                task.cancel()
            await asyncio.wait(stuck, timeout=self.callback_time_left())
        return len(tasks) - len(remaining), len(remaining)

    def callback_time_left(self) -> float:
        """Seconds left of the shutdown's ERROR-callback budget (0 before :meth:`drain` ends the grace period)."""
        if self._callback_deadline is None:
            return 0.0
        return max(self._callback_deadline - asyncio.get_running_loop().time(), 0.0)

    def _unfinished(self) -> list[asyncio.Task[None]]:
        return [record.task for record in list(self.state.active.values()) if record.task is not None]
