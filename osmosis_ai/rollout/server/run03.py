"""A 0.3 rollout on the executor: admission, then the workflow and grader phases, each under its
own deadline, into one typed result.

Admission is the executor's (503 while draining, 429 at the queue limit), then the id's (409).
The rollout then waits for one of the executor's slots; the agent's deadline is what the controller
gave less the time spent queued, the grader's is its own (a workflow finishing just in time still
gets the whole grading window). A phase without a deadline from the controller gets the server's
``request_timeout_seconds``. User code runs through :meth:`RolloutExecutor.call_within`, so one that
ignores cancellation is abandoned and its slot freed.

Every way a rollout ends is a typed result: an exception is ``failure`` with a category (its own
``TimeoutError``: ``timeout``; a failed chat call of a 0.2 agent's client: ``http_error``;
``ValueError``/``TypeError``/``AssertionError``: ``validation_error``; anything else, ``SystemExit``
included: ``agent_error``), a deadline is ``timeout``, a grader that raises or sets no reward fails
the rollout — a reward is on the wire only for a graded success.
With ``grading`` (:mod:`osmosis_ai.rollout.backend.local.grading`) the grader runs in worker
processes, which answer with the graded sample or the typed failure themselves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from osmosis_ai._usercode import UserCodeRaised, forget_traceback
from osmosis_ai.observe import tracing
from osmosis_ai.rollout.backend.local.backend import LocalBackend
from osmosis_ai.rollout.backend.local.grading import GraderRuntime
from osmosis_ai.rollout.context import RolloutContext
from osmosis_ai.rollout.core.exceptions import (
    OsmosisServerError,
    OsmosisTimeoutError,
    OsmosisTransportError,
    OsmosisValidationError,
)
from osmosis_ai.rollout.server.executor import SHUTDOWN_MESSAGE, RolloutExecutor
from osmosis_ai.rollout.server.results03 import DuplicateRollout, Results03
from osmosis_ai.rollout.server.state import RolloutRecord
from osmosis_ai.rollout.types.protocol import RolloutInitRequest, RolloutResultResponse
from osmosis_ai.rollout.types.sample import ExecutionRequest, ExecutionResult, RolloutSample
from osmosis_ai.rollout.types.status import RolloutErrorCategory, RolloutStatus, category_of

logger = logging.getLogger(__name__)

# A chat call of a 0.2 agent loop served on 0.3's wire (rollout.bridge.loop_backend) that failed.
CHAT_FAILURES = (OsmosisTransportError, OsmosisServerError, OsmosisValidationError, OsmosisTimeoutError)


def _failed(
    category: RolloutErrorCategory, message: str, sample: RolloutSample | None = None
) -> ExecutionResult:
    return ExecutionResult(
        status=RolloutStatus.FAILURE, err_category=category, err_message=message, sample=sample
    )


def wire_result(rollout_id: str, result: ExecutionResult) -> RolloutResultResponse:
    """``result`` as the wire carries it: the sample's reward only on a success that keeps the
    sample, its ``trajectory_messages`` only when they are not its ``messages`` (an agent framework's
    sample: its own items as messages, the chat messages the model saw as the trajectory), and a
    sample that cannot be JSON reduced to its reward, label and ``remove_sample``."""
    sample = result.sample
    if sample is not None:
        keep_reward = result.status is RolloutStatus.SUCCESS and not sample.remove_sample
        update: dict[str, Any] = {}
        trajectory = sample.trajectory_messages
        if trajectory is None or list(trajectory) == list(sample.messages):
            update["trajectory_messages"] = None
        if not keep_reward:
            update["reward"] = None
        sample = sample.model_copy(update=update)
        try:
            json.dumps(sample.model_dump(mode="json"), allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            logger.warning("rollout %s: its sample is not JSON; only its reward is returned", rollout_id)
            sample = RolloutSample(
                reward=sample.reward,
                label=sample.label,
                remove_sample=sample.remove_sample,
                trajectory_messages=None,
            )
    return RolloutResultResponse(
        rollout_id=rollout_id,
        status=result.status,
        sample=sample,
        err_message=result.err_message,
        err_category=result.err_category,
    )


class Runner03:
    """Admits 0.3 rollouts and runs them on ``executor`` with ``backend``, publishing to ``results``."""

    def __init__(
        self,
        executor: RolloutExecutor,
        backend: LocalBackend,
        results: Results03,
        process_id: str,
        grading: GraderRuntime | None = None,
    ) -> None:
        self.executor = executor
        self.backend = backend
        self.results = results
        self.process_id = process_id
        self.grading = grading

    async def admit(self, request: RolloutInitRequest) -> str:
        """Start ``request``; its lease token. Raises the executor's refusal (503/429),
        ``DuplicateRollout`` (409) or ``SharedStateUnavailable`` (the results' store failed: 503)."""
        self.executor.check_admission()
        rollout_id = request.rollout_id
        state = self.executor.state
        if rollout_id in state.active:  # being admitted, or running
            raise DuplicateRollout(rollout_id)
        # counted from here, so the submits admitted while the store writes this one see it
        record = RolloutRecord(rollout_id, rollout_id)
        state.add(record)
        try:
            token = await self.results.register(rollout_id)
        except BaseException:
            state.discard(record)
            raise
        loop = asyncio.get_running_loop()
        record.task = loop.create_task(self._run(record, request, loop.time()))
        self.results.bind(rollout_id, record.task)
        if self.executor.metrics is not None:
            self.executor.metrics.rollout_started()
        return token

    async def _run(self, record: RolloutRecord, request: RolloutInitRequest, admitted: float) -> None:
        rollout_id = request.rollout_id
        results = self.results
        try:
            try:
                async with self.executor.slot():
                    results.set_status(rollout_id, RolloutStatus.RUNNING)
                    queued = asyncio.get_running_loop().time() - admitted
                    result = await self._traced(request, queued)
            except asyncio.CancelledError:
                if self.executor.draining:
                    await results.finish(
                        rollout_id,
                        wire_result(
                            rollout_id, _failed(RolloutErrorCategory.INTERNAL_ERROR, SHUTDOWN_MESSAGE)
                        ),
                    )
                else:  # a cancel or an expired lease, which published the result already
                    await results.finish(
                        rollout_id,
                        RolloutResultResponse(rollout_id=rollout_id, status=RolloutStatus.CANCELLED),
                    )
                raise
            except Exception as exc:  # user code cannot get here (call_within keeps it): a defect of ours
                logger.exception("rollout %s: the server failed to run it", rollout_id)
                result = _failed(RolloutErrorCategory.INTERNAL_ERROR, f"the rollout server failed: {exc!r}")
            await results.finish(rollout_id, wire_result(rollout_id, result))
        finally:
            self.executor.state.finish(record)

    async def _traced(self, request: RolloutInitRequest, queued: float) -> ExecutionResult:
        """:meth:`_phases` in the rollout's span and figures, as a 0.2 rollout's run is."""
        metrics = self.executor.metrics
        attributes = {"osmosis.rollout.id": request.rollout_id}
        with tracing.rollout(self.executor.state.agent_loop_name, attributes) as span:
            started = time.perf_counter()
            result = await self._phases(request, queued)
            failed = result.status is not RolloutStatus.SUCCESS
            reward = None if failed or result.sample is None else result.sample.reward
            tracing.ended(span, result.status.value, result.err_message if failed else None, reward=reward)
        if metrics is not None:
            metrics.rollout_ran(time.perf_counter() - started)
            metrics.finished(result.status.value)
            if failed:
                metrics.agent_error(result.err_category.value if result.err_category else "failure")
        return result

    async def _phases(self, request: RolloutInitRequest, queued: float) -> ExecutionResult:
        rollout_id = request.rollout_id
        job = ExecutionRequest(
            id=rollout_id,
            prompt=request.initial_messages,
            label=request.label,
            metadata=request.metadata,
            agent_timeout_sec=request.agent_timeout_sec,
            grader_timeout_sec=request.grader_timeout_sec,
            grade=request.grade,
        )

        async def on_status(status: RolloutStatus) -> None:
            self.results.set_status(rollout_id, status)

        ambient = RolloutContext(
            chat_completions_url=request.chat_completions_url,
            api_key=request.llm_api_key,
            rollout_id=rollout_id,
            process_id=self.process_id,
            on_status=on_status,
        )
        backend = self.backend
        with ambient:  # the child tasks running user code copy the context, and with it this one
            workflow = await self._phase(
                "workflow", rollout_id, lambda: backend.run_workflow(job), request.agent_timeout_sec, queued
            )
            if workflow.status is not RolloutStatus.SUCCESS or not request.grade:
                return workflow
            refusal = backend.cannot_grade(job)
            if refusal is not None:
                return _failed(RolloutErrorCategory.VALIDATION_ERROR, refusal, workflow.sample)
            self.results.set_status(rollout_id, RolloutStatus.GRADING)
            grading = self.grading
            graded = await self._phase(
                "grader",
                rollout_id,
                (lambda: grading.grade(job, workflow.sample))
                if grading is not None
                else (lambda: backend.grade(job, workflow.sample)),
                request.grader_timeout_sec,
                0.0,
            )
        if graded.status is not RolloutStatus.SUCCESS and graded.sample is None:
            graded.sample = workflow.sample
        return graded

    async def _phase(
        self,
        phase: str,
        rollout_id: str,
        call: Callable[[], Awaitable[RolloutSample | ExecutionResult | None]],
        limit: float | None,
        queued: float,
    ) -> ExecutionResult:
        """Run one phase under its deadline; its sample, or the typed failure."""
        executor = self.executor
        budget = executor.timeout if limit is None else max(limit - queued, 0.0)
        if budget is not None and budget <= 0:  # the deadline passed while the rollout was queued
            message = _deadline_message(phase, limit, budget, queued)
            logger.error("rollout %s: %s", rollout_id, message)
            return _failed(RolloutErrorCategory.TIMEOUT, message)
        started = time.monotonic()  # not loop.time(): uvloop's is cached per iteration
        ran = await executor.call_within(call, budget)
        # A phase that blocked the event loop past its deadline and then returned is late all the same.
        late = budget is not None and time.monotonic() - started > budget
        if ran.timed_out or late:
            message = _deadline_message(phase, limit, budget, queued)
            if ran.abandoned:
                message += (
                    f"; it ignored cancellation for {executor.abandon_grace:g} s more and was abandoned"
                )
            logger.error("rollout %s: %s", rollout_id, message)
            return _failed(RolloutErrorCategory.TIMEOUT, message)
        task = ran.task
        if task.cancelled():  # the user's code raised CancelledError itself; nobody cancelled it
            return _failed(RolloutErrorCategory.AGENT_ERROR, f"the {phase} raised CancelledError")
        exc = task.exception()
        if exc is not None:
            shown = exc.original if isinstance(exc, UserCodeRaised) else exc
            logger.error(
                "rollout %s: the %s raised",
                rollout_id,
                phase,
                exc_info=(type(shown), shown, shown.__traceback__),
            )
            message = str(exc) or type(exc).__name__
            category = (
                RolloutErrorCategory.HTTP_ERROR if isinstance(shown, CHAT_FAILURES) else category_of(shown)
            )
            forget_traceback(shown)
            forget_traceback(exc)
            return _failed(category, f"{phase}: {message}")
        value = task.result()
        if isinstance(value, ExecutionResult):  # a grader worker's typed failure, logged where it was made
            return value
        return ExecutionResult(status=RolloutStatus.SUCCESS, sample=value)


def _deadline_message(phase: str, limit: float | None, budget: float | None, queued: float) -> str:
    if limit is None:
        return f"the {phase} exceeded the server's deadline of {budget:g} s (request_timeout_seconds)"
    message = f"the {phase} exceeded its {limit:g} s deadline"
    if queued >= 0.1:
        message += f" ({queued:.1f} s of it spent queued)"
    return message
