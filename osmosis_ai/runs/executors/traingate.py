"""The TrainGate executor: an agent behind a rollout server, driven over the wire as a trainer would.

For each item it opens a session on the local TrainGate (:class:`~osmosis_ai.traingate.gateway.TrainGate`),
POSTs ``/v1/rollout/init`` to the rollout server with the gateway as ``server_url``, and waits for
the ``/v1/rollout/completed`` callback; the gateway answers the agent's chat calls in between and
checks the protocol. The rollout's time limit covers its init too: a server that never answers
costs the limit, not the HTTP client's own (longer) limits and retries. How it ended is the
session's status — ``COMPLETED``/``ERROR`` as the server reported, or an infrastructure failure
(``INIT_FAILED``, ``UNREACHABLE``, ``TIMEOUT``) — and so its outcome; the attempt's record is the
session's (:meth:`~osmosis_ai.traingate.session.RolloutSession.to_record`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from osmosis_ai.evaluation.outcome import Outcome
from osmosis_ai.rollout.core.schemas import REWARD_ERROR_FIELD
from osmosis_ai.runs.items import Deadline, WorkItem
from osmosis_ai.runs.result import Attempt

if TYPE_CHECKING:
    from osmosis_ai.traingate.gateway import TrainGate
    from osmosis_ai.traingate.launcher import RolloutLauncher
    from osmosis_ai.traingate.session import RolloutSession

# Record keys the engine owns: the scored outcome and reward replace the session's unscored ones.
_SCORED = ("outcome", "reward", "reward_error")


def row_messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The initial conversation of a dataset row."""
    return [
        {"role": "system", "content": row["system_prompt"]},
        {"role": "user", "content": row["user_prompt"]},
    ]


def row_metadata(row: Mapping[str, Any], row_index: int, sample_index: int) -> dict[str, Any]:
    """Request metadata: ground truth, position, and every extra column of the row."""
    extra = {k: v for k, v in row.items() if k not in ("system_prompt", "user_prompt")}
    return {
        **extra,
        "ground_truth": row["ground_truth"],
        "row_index": row_index,
        "sample_index": sample_index,
    }


class TrainGateExecutor:
    """Runs each item as one rollout through ``launcher``'s server and ``gate`` (see the module docstring).

    ``timeout`` bounds each rollout from its init to its callback. The gateway forgets a finished
    rollout once ``retain_finished`` later ones have finished (a late callback for it is then refused
    as unknown; ``None`` keeps every one), and with ``keep_turns=False`` the session lets go of its
    per-turn token data once the record holds it (it dominates a run's memory).
    """

    def __init__(
        self,
        gate: TrainGate,
        launcher: RolloutLauncher,
        *,
        timeout: float = 300.0,
        max_turns: int = 10,
        max_tokens_total: int = 8192,
        completion_params: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        retain_finished: int | None = 1024,
        keep_turns: bool = True,
    ) -> None:
        self.gate = gate
        self.launcher = launcher
        self.timeout = timeout
        self.max_turns = max_turns
        self.max_tokens_total = max_tokens_total
        self.completion_params = dict(completion_params or {})
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.retain_finished = retain_finished
        self.keep_turns = keep_turns
        self._retired: deque[str] = deque()

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        session = self.gate.open_session(
            f"tg-{self.run_id}-r{item.row_index}-s{item.sample_index}",
            row_messages(item.row),
            row_index=item.row_index,
            sample_index=item.sample_index,
            metadata=row_metadata(item.row, item.row_index, item.sample_index),
        )
        try:
            limit = self.timeout if deadline is None else min(self.timeout, deadline.seconds)
            end = (
                time.monotonic() + limit if deadline is None else min(time.monotonic() + limit, deadline.end)
            )
            await self._drive(session, limit, end)
            return self._attempt(session)
        finally:
            self._retire(session)

    async def _drive(self, session: RolloutSession, limit: float, end: float) -> None:
        """Init the rollout and wait for its callback until ``end``; ``limit`` is the limit as configured."""
        from osmosis_ai.traingate.launcher import InitRejected, ServerUnreachable

        session.started_at = time.monotonic()
        request = self.launcher.build_request(
            session,
            self.gate.url,
            completion_params=self.completion_params,
            max_turns=self.max_turns,
            max_tokens_total=self.max_tokens_total,
        )
        try:
            init = await asyncio.wait_for(self.launcher.init(request), max(end - time.monotonic(), 0.0))
        except (InitRejected, ServerUnreachable) as exc:
            session.initialized.set()
            session.finish("INIT_FAILED" if isinstance(exc, InitRejected) else "UNREACHABLE", str(exc))
            return
        except asyncio.TimeoutError:
            session.initialized.set()
            session.finish(
                "TIMEOUT",
                f"the rollout server at {self.launcher.server_url} did not answer the init within {limit:g}s",
            )
            return
        session.tools = [tool.model_dump(mode="json", exclude_none=True) for tool in init.tools]
        session.initialized.set()
        if not session.finished:
            session.status = "RUNNING"
        try:
            await asyncio.wait_for(session.done.wait(), timeout=max(end - time.monotonic(), 0.001))
        except asyncio.TimeoutError:
            session.finish(
                "TIMEOUT",
                f"no /v1/rollout/completed callback within {limit:g}s ({session.num_turns} chat turn(s) served)",
            )

    def _attempt(self, session: RolloutSession) -> Attempt:
        record = session.to_record()
        for key in _SCORED:
            record.pop(key, None)
        turns = session.turns
        outcome = session.outcome
        error = session.error_message
        if outcome is Outcome.NO_MODEL_CALLS:
            error = "the agent finished without calling the model"
        elif error is None and session.errors and outcome is not Outcome.COMPLETED:
            error = session.errors[-1]
        response = session.response or {}
        reward_error = (response.get("extra_fields") or {}).get(REWARD_ERROR_FIELD)
        attempt = Attempt(
            outcome,
            error=error,
            final_messages=session.final_messages,
            agent_reward=response.get("reward"),
            agent_reward_error=reward_error if isinstance(reward_error, str) and reward_error else None,
            finish_reason=response.get("finish_reason"),
            duration_ms=session.latency_ms,
            prompt_tokens=sum(int(t.usage.get("prompt_tokens") or 0) for t in turns),
            completion_tokens=sum(int(t.usage.get("completion_tokens") or 0) for t in turns),
            num_llm_calls=session.num_turns,
            extra=record,
            source=session,
        )
        if not self.keep_turns:
            session.release_turns()
        return attempt

    def _retire(self, session: RolloutSession) -> None:
        if self.retain_finished is None:
            return
        self._retired.append(session.rollout_id)
        while len(self._retired) > self.retain_finished:
            self.gate.sessions.pop(self._retired.popleft(), None)
