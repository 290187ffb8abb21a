"""What running one work item produced (:class:`Attempt`), and the scored, typed end of it (:class:`Result`).

An executor returns an :class:`Attempt`: how the run of the item ended *before* scoring (its
:class:`~osmosis_ai.outcome.Outcome` is ``completed`` when the agent finished having
called the model), the final conversation, the agent's own reward as reported, and what it cost.
The scorer makes it a :class:`Result`: the outcome after scoring, the reward and the named scores,
or the scoring errors.

``Result.record()`` is the record shape every command journals and writes, keyed as the
commands' files have always been keyed where they mean the same thing (``row_index``,
``sample_index``, ``outcome``, ``error``, ``reward``, ``finish_reason``, ``duration_ms``,
``token_usage``...), with the dataset row the item ran on (``input_record``: what the scorer saw
as the ground truth and ``extra_info``, so the record can be scored again with no other file); an
executor adds what only it knows (a rollout run's turns and token ids, its
protocol checks) through ``Attempt.extra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.items import WorkItem

Message = dict[str, Any]


@dataclass
class Attempt:
    """How running one item ended before it was scored, and what it cost."""

    outcome: Outcome
    error: str | None = None
    final_messages: list[Message] = field(default_factory=list)
    agent_reward: Any = None
    """The agent's own reward, exactly as it reported it (the scorer checks it)."""
    agent_reward_error: str | None = None
    """The score rule's refusal of the agent's reward, when a rollout server applied the rule and sent
    the refusal instead of the reward; the scorer takes it as that check's outcome."""
    finish_reason: str | None = None
    duration_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    num_llm_calls: int = 0
    retries: int = 0
    systemic: str | None = None
    """Why no later item can succeed either (a refused key, an unknown model): the run stops, and
    this item is not journalled, so the run after the fix runs it."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What only this executor records (JSON), merged into the record."""
    source: Any = field(default=None, repr=False, compare=False)
    """The executor's own object for the item (a rollout's gateway session), for library callers;
    never journalled."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Result:
    """The typed, scored end of one work item."""

    item: WorkItem
    attempt: Attempt
    outcome: Outcome
    reward: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    score_errors: dict[str, str] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.outcome is Outcome.COMPLETED

    @property
    def error(self) -> str | None:
        """Why the item did not complete: the run's error, else the first scoring error."""
        return self.attempt.error or self.reward_error

    @property
    def reward_error(self) -> str | None:
        """The first scoring error (a function that raised or returned no score), if any."""
        return next(iter(self.score_errors.values()), None)

    def record(self) -> dict[str, Any]:
        """The item's JSON record (see the module docstring); the executor's own keys come first."""
        attempt = self.attempt
        return {
            **attempt.extra,
            "row_index": self.item.row_index,
            "sample_index": self.item.sample_index,
            "success": self.success,
            "outcome": self.outcome.value,
            "error": self.error,
            "duration_ms": round(attempt.duration_ms, 3),
            "token_usage": {
                "prompt_tokens": attempt.prompt_tokens,
                "completion_tokens": attempt.completion_tokens,
                "total_tokens": attempt.tokens,
                "num_llm_calls": attempt.num_llm_calls,
            },
            "retried_calls": attempt.retries,
            "reward": self.reward,
            "reward_error": self.reward_error,
            "finish_reason": attempt.finish_reason,
            "scores": dict(self.scores),
            "eval_errors": dict(self.score_errors),
            "input_record": dict(self.item.row),
        }
