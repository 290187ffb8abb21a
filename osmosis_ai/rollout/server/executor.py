"""Accepting rollouts and running them: the init path, the background task, the one terminal callback.

Init (:meth:`RolloutExecutor.start`) deduplicates by key, asks the agent for its tools, and returns
the 202 body as bytes. The tool list is validated once and reused while the agent keeps returning an
equal list.

Each accepted rollout runs in one task: wait for a concurrency slot, run ``agent.run(ctx)`` in a
child task under the per-rollout deadline, commit the one terminal callback, free the slot, then
deliver it (:mod:`~osmosis_ai.rollout.server.delivery`: the outbox, retries, wake-ups), holding no
slot while it is retried. The rules:

* whatever the agent raises — any ``BaseException``: ``SystemExit`` from an ``argparse`` inside a
  tool, ``KeyboardInterrupt``, a custom subclass — ends that rollout with ERROR and stays inside its
  task: asyncio would otherwise re-raise ``SystemExit``/``KeyboardInterrupt`` out of the event loop
  and stop the server;
* an agent that swallows the deadline's cancellation gets ``abandon_grace_seconds`` more; then its
  rollout is abandoned (its child task left to itself, counted in ``/health``), its slot freed and
  its ERROR sent;
* delivery is at-least-once (see the delivery module); an init repeated while the result is
  unacknowledged has it re-sent at once, and a duplicate init for a finished rollout whose result
  is no longer stored (acknowledged) starts the rollout afresh;
* the agent's reward goes by the score rule (:func:`~osmosis_ai.rewards.score.agent_reward`): one
  that is not a finite real number (a bool, a string, NaN) is never sent as a number; the callback
  carries the rule's message in ``extra_fields["reward_error"]`` instead, the rollout still COMPLETED;
* a COMPLETED result whose delivery fails is never re-reported as ERROR: TrainGate may have
  recorded it, and a second, contradicting terminal callback would be worse than a missing one;
* on agent errors, timeouts and shutdown, ERROR carries the conversation as last seen and full
  metrics, so partial work reaches the trainer; ``error_message`` is never empty;
* the record is created only after the init response exists and always moves to ``completed``
  when the task ends, so a failed init can be retried and no record leaks;
* ``request_timeout_seconds`` bounds ``run`` and ``get_tools``, so a hung agent cannot hold a
  concurrency slot forever;
* a rollout whose trainer does not answer (an attempt of a chat call timed out or was refused) gives
  its slot back for the rest of that call, and calls to a trainer whose last attempt went unanswered
  start without a slot: waiting on a dead ``server_url`` takes no slot from other trainers' rollouts.
  The rollout takes a slot again (at the back of the queue) before its agent goes on;
* the rollout's ``ctx.base_url`` (:mod:`~osmosis_ai.rollout.model_proxy`) closes when its agent ends,
  its calls in flight cancelled: an agent that goes on (abandoned) reaches the trainer no more;
* an optional queue limit rejects inits with 429 instead of queueing without bound;
* shutdown drains in-flight rollouts for a grace period, then ends the rest with ERROR.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from osmosis_ai._deadline import Deadline
from osmosis_ai._http import FailureLog, endpoint_of, get_shared_transport
from osmosis_ai._usercode import UserCodeRaised, contain, forget_traceback
from osmosis_ai.errors import RewardReturnError
from osmosis_ai.observe import tracing
from osmosis_ai.rewards.score import agent_reward
from osmosis_ai.rollout.client import CompletionsResult, OsmosisLLMClient
from osmosis_ai.rollout.core.base import RolloutContext, RolloutResult
from osmosis_ai.rollout.core.exceptions import (
    OsmosisServerError,
    OsmosisTimeoutError,
    OsmosisTransportError,
    RolloutValueError,
)
from osmosis_ai.rollout.core.schemas import InitResponse
from osmosis_ai.rollout.server.agent_tools import GetToolsCaller, ToolsCache
from osmosis_ai.rollout.server.delivery import Deliveries
from osmosis_ai.rollout.server.errors import SharedStateUnavailable
from osmosis_ai.rollout.server.outbox import Delivery, Outbox
from osmosis_ai.rollout.server.state import AppState, RolloutRecord
from osmosis_ai.rollout.server.state_memory import MemoryState
from osmosis_ai.rollout.server.state_shared import Claim, SharedState

if TYPE_CHECKING:
    from osmosis_ai.observe.metrics import ServerMetrics
    from osmosis_ai.rollout.config.settings import RolloutClientSettings
    from osmosis_ai.rollout.core.base import RolloutAgentLoop
    from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema, RolloutMetrics, RolloutRequest
    from osmosis_ai.rollout.server.config import ServerConfig

logger = logging.getLogger(__name__)

_TERMINAL_STATUSES = ("COMPLETED", "ERROR")
_TRAINER_UNANSWERED = (OsmosisTransportError, OsmosisTimeoutError, OsmosisServerError)
_UNWIND_SHARE = 0.1  # of the shutdown callback budget
STATE_RETRY_AFTER_SECONDS = 1
_CLAIM_ANSWER_WAIT_SECONDS = 10.0
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
    reward_error: str | None = None


def _pool_for(client: RolloutClientSettings, max_concurrent: int) -> RolloutClientSettings:
    """Client settings whose shared pool has a connection for every rollout allowed to run at once.

    One pool serves the whole process, so a pool smaller than ``max_concurrent`` would queue
    rollouts' chat calls behind each other.
    """
    if client.max_connections >= max_concurrent:
        return client
    return client.model_copy(update={"max_connections": max_concurrent})


def _no_agent_loop(request: RolloutRequest) -> Any:
    raise RuntimeError("this RolloutServer serves a 0.3 backend, not a RolloutAgentLoop: use POST /rollout")


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _unbuildable(rollout_id: str, status: str, exc: Exception) -> str:
    """Log the defect ``exc`` that keeps the ``status`` callback from being built; the ERROR's message."""
    logger.error("rollout %s: the %s callback could not be built", rollout_id, status, exc_info=exc)
    return f"the RolloutServer could not build the {status} callback: {type(exc).__name__}"


@dataclass(frozen=True)
class Bounded:
    """How :meth:`RolloutExecutor.call_within` left user code: ``task`` is done unless ``abandoned``."""

    task: asyncio.Task[Any]
    timed_out: bool = False
    abandoned: bool = False


class Slot:
    """One rollout's claim on a concurrency slot, given back while its agent waits on a trainer that
    does not answer and taken again before the agent goes on."""

    __slots__ = ("ended", "held", "state")

    def __init__(self, state: AppState) -> None:
        self.state = state
        self.held = False
        self.ended = False  # the rollout is over: a late take() must not hold a slot for nobody

    async def take(self) -> None:
        if self.held or self.ended:
            return
        await self.state.semaphore.acquire()
        if self.ended:  # the rollout ended while this waited (an abandoned agent)
            self.state.semaphore.release()
            return
        self.held = True
        self.state.running += 1

    def give(self) -> None:
        if self.held:
            self.held = False
            self.state.running -= 1
            self.state.semaphore.release()


class _TrainerClient(OsmosisLLMClient):
    """The client of one rollout's agent: its chat calls hold no slot while the trainer does not answer."""

    def __init__(self, *args: Any, slot: Slot, unanswered: set[str], endpoint: str, **kwargs: Any) -> None:
        super().__init__(*args, on_attempt=self._heard, **kwargs)
        self._slot = slot
        self._unanswered = unanswered  # the executor's: endpoints whose last attempt got no answer
        self._endpoint = endpoint

    def _heard(self, status: int | None) -> None:
        if status is None:
            self._unanswered.add(self._endpoint)
            self._slot.give()
        else:
            self._unanswered.discard(self._endpoint)

    async def chat_completions(self, *args: Any, **kwargs: Any) -> CompletionsResult:
        if self._endpoint in self._unanswered:
            self._slot.give()
        try:
            result = await super().chat_completions(*args, **kwargs)
        except Exception:  # the agent may catch the failure and go on; a cancellation takes no slot
            await self._slot.take()
            raise
        await self._slot.take()
        return result


class RolloutExecutor:
    """Starts rollouts for one app and reports their outcome to TrainGate.

    Its slots, queue limit, deadlines and drain are the engine of both wires: the 0.2 init path here,
    and the 0.3 path (:mod:`~osmosis_ai.rollout.server.run03`), which serves with ``agent_loop=None``.
    """

    def __init__(
        self,
        agent_loop: RolloutAgentLoop | None,
        state: AppState,
        config: ServerConfig,
        shared: SharedState | None = None,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self.agent_loop = agent_loop
        self.state = state
        self.shared: SharedState = shared or MemoryState()
        self._releases: set[asyncio.Task[None]] = set()
        self.debug_dir = config.debug_dir
        self.queue_limit = config.server.max_queued_rollouts
        self.timeout = config.server.request_timeout_seconds or None  # 0: no deadline
        self.abandon_grace = config.server.abandon_grace_seconds
        self.client_settings = _pool_for(config.client, state.max_concurrent)
        self.tools_exclude_none = config.tools_exclude_none
        # chat calls and callbacks: a dead trainer logs a few lines a minute
        self.failures = FailureLog(logger)
        self.deliveries = Deliveries(
            Outbox(config.server.outbox_path),
            self.client_settings,
            config.server.delivery_window_seconds,
            config.server.outbox_max_age_seconds,
            self.failures,
            on_settled=None if isinstance(self.shared, MemoryState) else self._release,
        )
        self.metrics = metrics
        if metrics is not None:
            self.deliveries.on_attempt = metrics.callback_attempt
        self.accepting = True
        self.abandoned = 0  # rollouts whose agent ignored cancellation (their tasks run on, unowned)
        self.shared_error: str | None = None
        """Why the shared state failed at its last use (``None``: it answered): /health says degraded."""
        self._abandoned: set[asyncio.Task[Any]] = set()
        self._unanswered: set[str] = set()  # trainer endpoints whose last chat attempt got no answer
        self._draining = False  # True once shutdown cancels rollouts: a cancelled rollout reports ERROR
        self._callback_deadline: Deadline | None = None
        self._validate_tools = ToolsCache()
        self._get_tools = GetToolsCaller(
            agent_loop.get_tools if agent_loop is not None else _no_agent_loop, self.timeout
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
        if existing is not None and (key in state.active or self.deliveries.resend(key)):
            return await self._duplicate(existing, request)
        stored = self.deliveries.stored(key) if existing is None else None
        if stored is not None:  # finished before a restart, not acknowledged: send it again
            self.deliveries.resend(key)
            return self._init_body(stored.rollout_id, self._validate_tools(await self._get_tools(request)))
        self.check_admission()
        if existing is not None:
            logger.info("rollout %s: duplicate init after its result was acknowledged; starting afresh", key)
        claim = await self._claim(key, request.rollout_id)
        if claim is not None:
            return await self._claimed_elsewhere(key, claim, request)
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
            self._release(key)
            if record.ready is not None:
                record.ready.set_exception(
                    exc if isinstance(exc, Exception) else RuntimeError("init cancelled")
                )
                record.ready.exception()  # retrieved here: waiters get it through await
            raise
        record.task = asyncio.get_running_loop().create_task(self._run(record, request, tools))
        if self.metrics is not None:
            self.metrics.rollout_started()
        if record.ready is not None:
            record.ready.set_result(None)
        logger.debug("rollout %s accepted", key)
        if not isinstance(self.shared, MemoryState):
            try:
                await self.shared.answered(key, body)
            except SharedStateUnavailable as exc:
                # The rollout runs all the same; duplicates elsewhere answer with their own tools.
                logger.warning("rollout %s: cannot store the init answer for duplicates: %s", key, exc)
        return body

    def check_admission(self) -> None:
        """Raise :class:`_InitRefused` when no new rollout may start now: 503 while draining, 429 when
        the queue limit is reached (the one admission rule of both wires)."""
        if not self.accepting:
            raise _InitRefused(503, DRAINING_MESSAGE)
        state = self.state
        limit = self.queue_limit
        if limit is not None and state.active_count >= state.max_concurrent + limit:
            raise _InitRefused(
                429,
                f"the RolloutServer is at capacity ({state.running} running, {state.queued_count} queued, "
                f"queue limit {limit}); retry later",
            )

    # -- the state shared with other processes ----------------------------------------------------

    async def _claim(self, key: str, rollout_id: str) -> Claim | None:
        try:
            claim = await self.shared.claim(key, rollout_id)
        except SharedStateUnavailable as exc:
            logger.warning("init of rollout %s refused: %s", key, exc)
            self.shared_error = str(exc)
            raise _InitRefused(503, f"{exc}; retry later", retry_after=STATE_RETRY_AFTER_SECONDS) from None
        self.shared_error = None
        return claim

    async def _claimed_elsewhere(self, key: str, claim: Claim, request: RolloutRequest) -> bytes:
        """The 202 body for a key another process holds: its stored answer, once there is one.

        While the other init still waits for ``get_tools`` its answer is polled for (with back-off,
        at most ``_CLAIM_ANSWER_WAIT_SECONDS``); a claim that disappears meanwhile (that init failed)
        is claimed again here. A claim without a stored answer (adopted after a restart, or the
        state was unreachable when the answer was to be stored) is answered with this server's own
        tools, under the original ``rollout_id``.
        """
        deadline = Deadline.after(_CLAIM_ANSWER_WAIT_SECONDS)
        pause = 0.005
        current: Claim | None = claim
        while current is not None and current.body is None and deadline.remaining() > 0:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)
            try:
                current = await self.shared.lookup(key)
            except SharedStateUnavailable as exc:
                raise _InitRefused(
                    503, f"{exc}; retry later", retry_after=STATE_RETRY_AFTER_SECONDS
                ) from None
        if current is None:
            return await self.start(request)
        logger.debug("rollout %s: duplicate init of a rollout another process runs", key)
        if current.body:
            return current.body
        return self._init_body(current.rollout_id, self._validate_tools(await self._get_tools(request)))

    def _release(self, key: str) -> None:
        """Drop this process's claim on ``key`` in the background (logged if the state is unreachable)."""
        if isinstance(self.shared, MemoryState):
            return
        task = asyncio.get_running_loop().create_task(self._released(key))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _released(self, key: str) -> None:
        try:
            await self.shared.release(key)
        except SharedStateUnavailable as exc:
            logger.warning("rollout %s: cannot release its claim (kept until the record TTL): %s", key, exc)

    async def settle_releases(self, timeout: float) -> None:
        """Give the claim releases under way ``timeout`` seconds to finish (at shutdown)."""
        if self._releases:
            await asyncio.wait(set(self._releases), timeout=timeout)

    async def adopt_stored(self) -> None:
        """Claim the keys whose results this process's outbox holds (after a restart)."""
        if isinstance(self.shared, MemoryState):
            return
        keys = {delivery.key: delivery.rollout_id for delivery in self.deliveries.outbox.all()}
        try:
            await self.shared.adopt(keys)
        except SharedStateUnavailable as exc:
            logger.warning("cannot claim the %d results left in the outbox: %s", len(keys), exc)

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
        committed: Delivery | None = None
        holding = False
        try:
            try:
                async with self.slot() as slot:
                    holding = True
                    committed = await self._execute(request, tools, slot)
            except asyncio.CancelledError:
                if holding or not self._draining:
                    raise
                self._count_error("shutdown")
                committed = self._commit(request, None, _Outcome("ERROR", [], "error", SHUTDOWN_MESSAGE))
        finally:
            state.finish(record)
        if committed is not None:
            await self.deliveries.deliver(committed)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        """Hold one of the ``max_concurrent`` slots (waiting in the queue for it) while the body runs."""
        slot = Slot(self.state)
        await slot.take()
        try:
            yield slot
        finally:
            slot.ended = True
            slot.give()

    async def call_within(self, call: Callable[[], Awaitable[Any]], timeout: float | None) -> Bounded:
        """Run user code ``call()`` in a child task for at most ``timeout`` seconds (``None``: no limit).

        On the deadline the child is cancelled and given ``abandon_grace_seconds`` to end; one that
        ignores it is abandoned (left running, counted in ``/health``). Cancelling the caller cancels
        the child the same way and re-raises. A ``BaseException`` the code raises stays in the child
        (as ``UserCodeRaised``), so a ``SystemExit`` cannot stop the server.
        """
        child = asyncio.get_running_loop().create_task(contain(call))
        try:
            done, _ = await asyncio.wait((child,), timeout=timeout)
        except asyncio.CancelledError:
            await self._stop(child, self._shutdown_unwind())
            raise
        if done:
            return Bounded(child)
        return Bounded(child, timed_out=True, abandoned=not await self._stop(child, self.abandon_grace))

    async def _execute(self, request: RolloutRequest, tools: Any, slot: Slot) -> Delivery | None:
        """Run the agent and commit its callback; the callback to deliver, if there is one."""
        on_chat = self.metrics.chat_call if self.metrics is not None else None
        # Twice the connections, each endpoint at most half: calls waiting on a trainer that does
        # not answer (they hold no slot) leave the pool to the other trainers' rollouts.
        pool = self.client_settings.max_connections
        client = _TrainerClient(
            request.server_url,
            request.rollout_id,
            api_key=request.api_key,
            settings=self.client_settings,
            transport=get_shared_transport(2 * pool, per_host=pool),
            on_chat=on_chat,
            failures=self.failures,
            slot=slot,
            unanswered=self._unanswered,
            endpoint=endpoint_of(request.server_url),
        )
        ctx = RolloutContext(
            request=request,
            tools=tools,
            llm=client,
            _start_time=time.time(),
            _debug_dir=self.debug_dir,
        )
        attributes = {"osmosis.rollout.id": request.rollout_id}
        with tracing.rollout(self.state.agent_loop_name, attributes) as span:
            started = time.perf_counter()
            try:
                outcome = await self._outcome(ctx)
            finally:
                ctx._end_model_route()  # calls to ctx.base_url after the end: 404, never the trainer
            if self.metrics is not None:
                self.metrics.rollout_ran(time.perf_counter() - started)
            failed = outcome.status == "ERROR"
            tracing.ended(
                span, outcome.status, outcome.error_message if failed else None, reward=outcome.reward
            )
        return self._commit(request, client, outcome, ctx)

    def _client(self, server_url: str, rollout_id: str, api_key: str | None) -> OsmosisLLMClient:
        on_chat = self.metrics.chat_call if self.metrics is not None else None
        return OsmosisLLMClient(
            server_url,
            rollout_id,
            api_key=api_key,
            settings=self.client_settings,
            on_chat=on_chat,
            failures=self.failures,
        )

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.agent_error(kind)

    async def _outcome(self, ctx: RolloutContext) -> _Outcome:
        """Run the agent in a child task and turn whatever happens into the terminal callback's fields.

        The child task is what lets a rollout end although its agent ignores cancellation.
        """
        rollout_id = ctx.request.rollout_id
        agent_loop = self.agent_loop
        assert agent_loop is not None  # the 0.2 wire is served only with an agent loop (_no_agent_loop)
        try:
            ran = await self.call_within(lambda: agent_loop.run(ctx), self.timeout)
        except asyncio.CancelledError:
            if not self._draining:
                raise
            return self._failure(ctx, SHUTDOWN_MESSAGE, "shutdown")
        agent = ran.task
        if ran.timed_out:
            message = f"rollout exceeded the deadline of {self.timeout:g} s (request_timeout_seconds)"
            if ran.abandoned:
                message += f" and ignored cancellation for {self.abandon_grace:g} s more; abandoned"
                logger.error("rollout %s: %s", rollout_id, message)
                return self._failure(ctx, message, "abandoned")
            if agent.cancelled() or agent.exception() is not None:
                logger.error("rollout %s: %s", rollout_id, message)
                return self._failure(ctx, message, "timeout")
        if agent.cancelled():  # the agent raised CancelledError itself; nobody cancelled it
            return self._failure(ctx, "the agent loop raised CancelledError", "cancelled")
        exc = agent.exception()
        if exc is not None:
            shown = exc.original if isinstance(exc, UserCodeRaised) else exc
            if isinstance(shown, _TRAINER_UNANSWERED):  # no bug of the agent's: TrainGate did not answer
                self.failures.log(
                    logging.ERROR,
                    f"agent loop failed ({type(shown).__name__})",
                    endpoint_of(ctx.request.server_url),
                    "agent loop failed for rollout %s: a call to TrainGate failed: %s",
                    rollout_id,
                    shown,
                )
            else:
                logger.error(
                    "agent loop failed for rollout %s",
                    rollout_id,
                    exc_info=(type(shown), shown, shown.__traceback__),
                )
            message = str(exc) if isinstance(exc, UserCodeRaised) else _error_text(exc)
            forget_traceback(shown)
            forget_traceback(exc)
            return self._failure(ctx, message, "exception")
        return self._from_result(ctx, agent.result())

    async def _stop(self, agent: asyncio.Task[Any], grace: float) -> bool:
        """Cancel ``agent`` and wait ``grace`` seconds for it to end; ``False`` (abandoned) if it does not."""
        agent.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((agent,), timeout=grace)
        if agent.done():
            return True
        self.abandoned += 1
        self._abandoned.add(agent)
        agent.add_done_callback(self._abandoned.discard)
        return False

    def _shutdown_unwind(self) -> float:
        return max(self.callback_time_left() * _UNWIND_SHARE, 0.0) if self._draining else self.abandon_grace

    def _failure(self, ctx: RolloutContext, message: str, kind: str) -> _Outcome:
        """An ERROR outcome for the agent's failure of ``kind`` (the label of the metric counting it)."""
        self._count_error(kind)
        return _Outcome("ERROR", ctx.conversation, "error", message, ctx._build_metrics())

    def _from_result(self, ctx: RolloutContext, result: Any) -> _Outcome:
        if not isinstance(result, RolloutResult):
            return self._failure(
                ctx, f"run() returned {type(result).__name__}, expected a RolloutResult", "invalid_result"
            )
        status = result.status
        if status not in _TERMINAL_STATUSES:
            return self._failure(
                ctx,
                f"run() returned the invalid status {status!r}; use 'COMPLETED' or 'ERROR'",
                "invalid_result",
            )
        status = str(getattr(status, "value", status))
        reward_error = None
        try:
            reward = agent_reward(result.reward)
        except RewardReturnError as exc:  # the rollout stands; its reward is the refusal, never a number
            reward, reward_error = None, str(exc)
            logger.error("rollout %s: %s", ctx.request.rollout_id, reward_error)
        except Exception as exc:  # the reward's own code failed (its __float__ or __repr__ raised)
            return self._failure(ctx, _unbuildable(ctx.request.rollout_id, status, exc), "invalid_result")
        error_message = result.error_message
        if status == "ERROR":
            self._count_error("reported")
            if not error_message:
                error_message = "the agent loop reported an error without a message"
        return _Outcome(
            status,
            result.final_messages,
            result.finish_reason,
            error_message,
            result.metrics,
            reward,
            reward_error,
        )

    # -- the terminal callback ------------------------------------------------------------------------

    def _commit(
        self,
        request: RolloutRequest,
        client: OsmosisLLMClient | None,
        outcome: _Outcome,
        ctx: RolloutContext | None = None,
    ) -> Delivery | None:
        """Encode the one terminal callback and commit it to the outbox; the callback, if one was committed.

        A callback that cannot be built is replaced by one ERROR: with the conversation and metrics
        when those can be encoded, else a bare one.
        """
        if client is None:
            client = self._client(request.server_url, request.rollout_id, request.api_key)
        body, problem = self._encode(request.rollout_id, client, outcome)
        status = outcome.status
        if body is None and problem is not None:
            status = "ERROR"
            fallbacks = [self._failure(ctx, problem, "invalid_result")] if ctx is not None else []
            fallbacks.append(_Outcome("ERROR", [], "error", problem))
            for fallback in fallbacks:
                body, _ = self._encode(request.rollout_id, client, fallback)
                if body is not None:
                    break
        if body is None:
            self._release(request.idempotency_key or request.rollout_id)
            return None
        if self.metrics is not None:
            self.metrics.finished(status)
        delivery = Delivery(
            request.idempotency_key or request.rollout_id,
            request.rollout_id,
            request.server_url,
            request.api_key,
            body,
        )
        self.deliveries.commit(delivery)
        return delivery

    @staticmethod
    def _encode(
        rollout_id: str, client: OsmosisLLMClient, outcome: _Outcome
    ) -> tuple[bytes | None, str | None]:
        try:
            return client.encode_completion(
                status=outcome.status,
                final_messages=outcome.final_messages,
                finish_reason=outcome.finish_reason,
                error_message=outcome.error_message,
                metrics=outcome.metrics,
                reward=outcome.reward,
                reward_error=outcome.reward_error,
            ), None
        except RolloutValueError as exc:  # the fields do not fit RolloutResponse
            logger.error("rollout %s: cannot build the %s callback: %s", rollout_id, outcome.status, exc)
            return None, f"the agent loop returned an invalid result: {_error_text(exc)}"
        except Exception as exc:  # a defect in the result's values
            return None, _unbuildable(rollout_id, outcome.status, exc)

    @property
    def pending_deliveries(self) -> int:
        """Terminal callbacks not acknowledged by TrainGate yet."""
        return self.deliveries.pending

    # -- shutdown -------------------------------------------------------------------------------------

    async def drain(self, grace_seconds: float, callback_timeout_seconds: float) -> tuple[int, int]:
        """Stop accepting, let rollouts finish for ``grace_seconds``, then end the rest with ERROR.

        From then on every cancelled rollout reports ERROR (``SHUTDOWN_MESSAGE``), and delivering those
        callbacks gets ``callback_timeout_seconds`` in all (see :meth:`callback_time_left`); stragglers
        are cancelled again and end without one (logged; their callbacks stay in the outbox). Returns
        (finished during the grace period, ended by shutdown).
        """
        self.accepting = False
        tasks = self._unfinished()
        if tasks and grace_seconds > 0:
            await asyncio.wait(tasks, timeout=grace_seconds)
        self._draining = True
        self._callback_deadline = Deadline.after(callback_timeout_seconds)
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

    def close_abandoned(self) -> int:
        """Close the coroutines of abandoned agents, which would otherwise keep the event loop (and the
        process) from ending; returns how many there were.

        ``close()`` raises ``GeneratorExit`` where the agent waits, which an ``except Exception`` or
        ``except CancelledError`` does not catch.
        """
        abandoned = list(self._abandoned)
        for task in abandoned:
            with contextlib.suppress(RuntimeError):  # an agent that ignores GeneratorExit too
                task.get_coro().close()
            task.cancel()
        return len(abandoned)

    @property
    def draining(self) -> bool:
        """Whether shutdown has begun cancelling unfinished rollouts (after the grace period)."""
        return self._draining

    def callback_time_left(self) -> float:
        """Seconds left of the shutdown's ERROR-callback budget (0 before :meth:`drain` ends the grace period)."""
        return 0.0 if self._callback_deadline is None else self._callback_deadline.remaining()

    def _unfinished(self) -> list[asyncio.Task[None]]:
        return [record.task for record in list(self.state.active.values()) if record.task is not None]
