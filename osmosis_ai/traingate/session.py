"""Per-rollout state kept by the gateway: the conversation it expects next and everything it saw.

A :class:`RolloutSession` is created before ``/v1/rollout/init`` is sent and is the system of
record for that rollout: its callback key, each served turn with its token data, append-only
violations, rejected (unauthenticated) calls and the final response. :meth:`RolloutSession.to_record`
turns it into the JSON line written by ``osmosis rollout run --output``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from osmosis_ai.outcome import Outcome
from osmosis_ai.traingate.append_only import AppendOnlyViolation, canonical

if TYPE_CHECKING:
    from osmosis_ai.traingate.drift import DriftEvent
    from osmosis_ai.traingate.policy.base import Policy
    from osmosis_ai.traingate.tito import TokenTrace

Message = dict[str, Any]

# Statuses a session ends in. The first two come from the rollout server, the rest are infrastructure failures.
TERMINAL_STATUSES = ("COMPLETED", "ERROR")
INFRA_STATUSES = ("INIT_FAILED", "UNREACHABLE", "TIMEOUT")
MAX_REMEMBERED_REPLIES = 8  # chat calls per rollout whose answer a retry can still get back

# (HTTP status, JSON body) of one chat call, shared with its retries.
Reply = tuple[int, dict[str, Any]]


@dataclass
class TurnRecord:
    """One served chat completion and the token data a trainer would train on."""

    index: int
    num_request_messages: int
    message: Message
    finish_reason: str
    token_ids: list[int]
    logprobs: list[float] | None
    prompt_token_ids: list[int]
    usage: dict[str, int]
    sampling: dict[str, Any]
    token_source: str
    latency_ms: float

    def to_dict(self) -> dict[str, Any]:
        """The record as a shallow dict: token lists are shared, not copied (they are only serialised)."""
        return {name: getattr(self, name) for name in _TURN_FIELDS}


_TURN_FIELDS = tuple(f.name for f in fields(TurnRecord))


@dataclass
class RejectedCall:
    """A call for this rollout that the gateway refused (wrong callback key, call after completion)."""

    endpoint: str
    status: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RolloutSession:
    """Everything the gateway knows about one rollout. Mutated only on the event loop."""

    rollout_id: str
    row_index: int
    sample_index: int
    callback_key: str
    messages: list[Message]
    metadata: dict[str, Any]
    tools: list[Message] = field(default_factory=list)
    expected: list[Message] = field(default_factory=list)
    expected_keys: list[str] = field(default_factory=list)  # canonical JSON of each ``expected`` message
    turns: list[TurnRecord] = field(default_factory=list)
    num_turns: int = 0  # served chat turns; survives release_turns()
    completion_tokens: int = 0  # token ids generated over all turns; survives release_turns()
    context_tokens: int = 0  # prompt + completion ids of the latest turn: the trajectory a trainer sees
    violations: list[AppendOnlyViolation] = field(default_factory=list)
    rejected: list[RejectedCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    policy_errors: int = 0  # chat calls the policy failed to answer (a subset of ``errors``)
    response: dict[str, Any] | None = None
    duplicate_completions: int = 0
    status: str = "PENDING"
    error_message: str | None = None
    reward: float | None = None
    reward_error: str | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # Set once the init response (and so the tool list) is in: the agent may call back before that.
    initialized: asyncio.Event = field(default_factory=asyncio.Event)
    # Idempotency-Key of a chat call -> its answer: a retried call gets the first answer back.
    replies: dict[str, asyncio.Future[Reply]] = field(default_factory=dict)
    # The token-in-token-out sequence and its drift check, kept when the gateway renders a chat template.
    trace: TokenTrace | None = None
    # The policy answering this rollout's chat calls when not the gateway's own (one gateway serving
    # batches that each sample their own way).
    policy: Policy | None = None

    def __post_init__(self) -> None:
        self.expected = list(self.messages)
        self.expected_keys = [canonical(m) for m in self.expected]

    @property
    def finished(self) -> bool:
        return self.done.is_set()

    @property
    def latency_ms(self) -> float:
        end = self.finished_at or time.monotonic()
        return (end - self.started_at) * 1000 if self.started_at else 0.0

    @property
    def agent_reward(self) -> float | None:
        value = (self.response or {}).get("reward")
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def final_messages(self) -> list[Message]:
        """What the rollout server reported, or the conversation the gateway last saw if it reported none."""
        reported = (self.response or {}).get("final_messages")
        return list(reported) if reported else list(self.expected)

    @property
    def outcome(self) -> Outcome:
        """How the rollout ended, in the shared outcome model (only ``completed`` ones are scored)."""
        if self.status == "TIMEOUT":
            return Outcome.TIMEOUT
        if self.status in INFRA_STATUSES or self.status not in TERMINAL_STATUSES:
            return Outcome.INFRA_ERROR
        if self.status == "ERROR":
            return Outcome.MODEL_ERROR if self.policy_errors else Outcome.AGENT_ERROR
        if self.num_turns == 0:
            return Outcome.MODEL_ERROR if self.policy_errors else Outcome.NO_MODEL_CALLS
        if self.reward_error:
            return Outcome.REWARD_ERROR
        return Outcome.COMPLETED

    def finish(self, status: str, error_message: str | None = None) -> None:
        """Close the session with ``status`` (first terminal state wins)."""
        if self.finished:
            return
        self.status = status
        self.error_message = error_message
        self.finished_at = time.monotonic()
        self.replies.clear()
        self.done.set()

    def remember_reply(self, key: str) -> asyncio.Future[Reply]:
        """Register the chat call ``key`` as in progress; only the latest calls are remembered."""
        while len(self.replies) >= MAX_REMEMBERED_REPLIES:
            del self.replies[next(iter(self.replies))]
        reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.replies[key] = reply
        return reply

    def forget_reply(self, key: str) -> None:
        """Drop ``key`` so its next retry is served afresh (its first attempt failed)."""
        self.replies.pop(key, None)

    def add_turn(self, record: TurnRecord) -> None:
        self.turns.append(record)
        self.num_turns += 1
        self.completion_tokens += len(record.token_ids)
        self.context_tokens = len(record.prompt_token_ids) + len(record.token_ids)

    def release_turns(self) -> None:
        """Drop the per-turn token data once it has been written out (it dominates a run's memory)."""
        self.turns = []
        if self.trace is not None:
            self.trace.release()

    @property
    def drift_events(self) -> list[DriftEvent]:
        """Template drift found in this rollout (none without a chat template)."""
        return list(self.trace.events) if self.trace is not None else []

    def to_record(self) -> dict[str, Any]:
        """The JSON record of this rollout (one line of ``--output``)."""
        response = self.response or {}
        return {
            "rollout_id": self.rollout_id,
            "row_index": self.row_index,
            "sample_index": self.sample_index,
            "status": self.status,
            "outcome": self.outcome.value,
            "reward": self.reward,
            "agent_reward": self.agent_reward,
            "reward_error": self.reward_error,
            "finish_reason": response.get("finish_reason"),
            "error_message": self.error_message,
            "latency_ms": round(self.latency_ms, 3),
            "final_messages": self.final_messages,
            "turns": [t.to_dict() for t in self.turns],
            "append_only_violations": [v.to_dict() for v in self.violations],
            "rejected_calls": [r.to_dict() for r in self.rejected],
            "gateway_errors": list(self.errors),
            "duplicate_completions": self.duplicate_completions,
            "metrics": response.get("metrics") or {},
            "tools": [t.get("function", {}).get("name") for t in self.tools],
            **(self.trace.to_record() if self.trace is not None else {}),
        }
