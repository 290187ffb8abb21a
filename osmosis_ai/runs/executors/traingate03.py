"""The TrainGate executor for a 0.3 rollout server: the same gateway, sessions and records as 0.2's
(:class:`~osmosis_ai.runs.executors.traingate.TrainGateExecutor`), driven over 0.3's wire.

Each rollout is submitted with ``POST /rollout``: its ``chat_completions_url`` is the gateway's
rollout-scoped base (:meth:`~osmosis_ai.traingate.gateway.TrainGate.chat_base`), so the workflow's
chat calls get token ids and the append-only check as a 0.2 agent's do; its ``llm_api_key`` is the
session's callback key; the row's ``ground_truth`` is the label, its ``metadata`` object the rollout's
metadata when it has one (0.3's metadata mode; else its other columns and its position), and the
server grades. Its result is long-polled under the lease until it is finished or the rollout's
deadline passes (then it is cancelled on the server). How it ended becomes the session's status, and so its outcome:

* ``success``: ``COMPLETED``, the grader's reward the agent's reward (scored by the one score rule);
* ``failure`` with the workflow's sample: the grader failed, a ``COMPLETED`` rollout whose agent reward
  is that error (``reward_error`` when the server's reward is the run's), never a number; but a
  grader failing for the server's own reasons (``internal_error``: its workers are gone, or it raised
  :class:`~osmosis_ai.errors.InfrastructureError`, a sandbox that cannot start) is ``SERVER_ERROR``,
  an ``infra_error`` with the workflow's messages kept, since it says nothing of the answer;
* ``failure`` of the workflow: ``TIMEOUT`` for a deadline, ``SERVER_ERROR`` (an ``infra_error``) for
  the server's own failures (``internal_error``, ``lease_expired``), else ``ERROR`` (``agent_error``,
  or ``model_error`` when the gateway failed the workflow's chat calls);
* ``cancelled``: ``CANCELLED``, an ``infra_error`` (someone other than this run stopped it).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from osmosis_ai.rollout.core.schemas import REWARD_ERROR_FIELD
from osmosis_ai.rollout.types.protocol import RolloutInitRequest, RolloutResultResponse
from osmosis_ai.rollout.types.status import FINISHED, RolloutErrorCategory, RolloutStatus
from osmosis_ai.runs.dataset import METADATA_COLUMN
from osmosis_ai.runs.executors.traingate import TrainGateExecutor
from osmosis_ai.traingate.append_only import check_extension

if TYPE_CHECKING:
    from osmosis_ai._deadline import Deadline
    from osmosis_ai.traingate.launcher03 import Launcher03
    from osmosis_ai.traingate.session import RolloutSession

# Failures that are the server's, not the workflow's.
SERVER_FAILURES = frozenset({RolloutErrorCategory.INTERNAL_ERROR, RolloutErrorCategory.LEASE_EXPIRED})

# The server is told this much more time than the run gives the rollout: the run's deadline governs
# (it cancels the rollout and records the timeout in its own words), and the server's own deadline is
# the backstop that stops the workflow if this process is gone. Told the same instant, the two race.
SERVER_BACKSTOP_SEC = 5.0


class TrainGate03Executor(TrainGateExecutor):
    """Runs each item as one 0.3 rollout through ``launcher``'s server and ``gate`` (see the module docstring)."""

    launcher: Launcher03

    async def _drive(self, session: RolloutSession, bound: Deadline) -> None:
        """Submit the rollout and poll its result by ``bound``."""
        from osmosis_ai.traingate.launcher import InitRejected, ServerUnreachable
        from osmosis_ai.traingate.launcher03 import ResultRefused

        session.started_at = time.monotonic()
        session.initialized.set()  # a 0.3 rollout declares no tools: its chat calls need not wait
        request = RolloutInitRequest(
            rollout_id=session.rollout_id,
            initial_messages=session.messages,
            label=session.metadata.get("ground_truth"),
            metadata=request_metadata(session.metadata),
            chat_completions_url=self.gate.chat_base(session.rollout_id),
            llm_api_key=session.callback_key,
            grade=True,
            agent_timeout_sec=bound.remaining() + SERVER_BACKSTOP_SEC,
            grader_timeout_sec=bound.remaining() + SERVER_BACKSTOP_SEC,
        )
        server = self.launcher.server_url
        try:
            admitted = await asyncio.wait_for(
                self.launcher.submit(request, deadline=bound.end), max(bound.remaining(), 0.001)
            )
        except (InitRejected, ServerUnreachable) as exc:
            session.finish("INIT_FAILED" if isinstance(exc, InitRejected) else "UNREACHABLE", str(exc))
            return
        except asyncio.TimeoutError:
            session.finish(
                "TIMEOUT",
                f"the rollout server at {server} did not admit the rollout within {bound.seconds:g}s",
            )
            return
        if not session.finished:
            session.status = "RUNNING"
        while True:
            try:
                answer = await asyncio.wait_for(
                    self.launcher.result(
                        session.rollout_id,
                        admitted.polling_lease_token,
                        wait=admitted.result_wait_timeout_sec,
                    ),
                    max(bound.remaining(), 0.001),
                )
            except asyncio.TimeoutError:
                await self.launcher.cancel(session.rollout_id)
                session.finish(
                    "TIMEOUT",
                    f"no result from {server} within {bound.seconds:g}s ({session.num_turns} chat turn(s) served)",
                )
                return
            except (ResultRefused, ServerUnreachable) as exc:
                session.finish("SERVER_ERROR" if isinstance(exc, ResultRefused) else "UNREACHABLE", str(exc))
                return
            if answer.status in FINISHED:
                settle(session, answer)
                return


def request_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The rollout's ``metadata``: a row's ``metadata`` object as it is (0.3's metadata mode, whose
    workflow reads its input there), else the row's columns and position."""
    given = metadata.get(METADATA_COLUMN)
    return given if isinstance(given, dict) else metadata


def settle(session: RolloutSession, answer: RolloutResultResponse) -> None:
    """End ``session`` as the finished result ``answer`` says (the mapping of the module docstring)."""
    sample = answer.sample
    message = (
        answer.err_message or f"the rollout ended {answer.status} ({answer.err_category or 'no category'})"
    )
    if answer.status is RolloutStatus.CANCELLED:
        session.finish("CANCELLED", f"the rollout server cancelled the rollout: {message}")
        return
    if sample is None and answer.status is RolloutStatus.SUCCESS:
        session.finish("ERROR", "the rollout server reported success without a sample")
        return
    if sample is None:
        category = answer.err_category
        if category is RolloutErrorCategory.TIMEOUT:
            session.finish("TIMEOUT", message)
        else:
            session.finish("SERVER_ERROR" if category in SERVER_FAILURES else "ERROR", message)
        return
    # The trajectory is the conversation as chat messages; an agent framework's sample keeps its own
    # items as ``messages`` (for its grader) and sends the chat messages the model saw as the trajectory.
    final = [
        dict(m)
        for m in (sample.messages if sample.trajectory_messages is None else sample.trajectory_messages)
    ]
    infra = answer.status is RolloutStatus.FAILURE and answer.err_category in SERVER_FAILURES
    session.response = {
        "status": str(answer.status),
        "final_messages": final,
        "reward": sample.reward if answer.status is RolloutStatus.SUCCESS else None,
        "metrics": dict(sample.metrics),
        "extra_fields": {}
        if answer.status is RolloutStatus.SUCCESS
        else {REWARD_ERROR_FIELD: f"the grader failed: {message}"},
    }
    if final:
        violation, _ = check_extension(session.expected, session.expected_keys, final, turn=-1)
        if violation is not None:
            session.violations.append(violation)
    if infra:
        session.finish("SERVER_ERROR", f"the grader failed: {message}")
        return
    session.finish("COMPLETED")
