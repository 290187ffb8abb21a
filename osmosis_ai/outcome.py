"""How a row (or one sample of a row) of a run ended, and whether the run as a whole passed.

Every unit of work ends in exactly one :class:`Outcome`. Only ``completed`` units are scored: a
unit that failed for any other reason has no score, so infrastructure trouble can never pass for a
score of 0 and drag an average down. :class:`OutcomeCounts` tallies a run, and :func:`verdict`
applies the rule every command uses for its exit status:

* any ``infra_error`` or ``timeout`` fails the run (the run did not measure what it was meant to);
  a reward that hangs (``reward_timeout``) or takes its process down (``reward_crash``) is the
  scored code failing on that unit, not the machinery, so it counts like ``reward_error``;
* a run in which nothing completed fails;
* otherwise the run fails when the share of failed units is above the allowed failure rate
  (``0`` by default: every unit must complete).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


class Outcome(str, enum.Enum):
    """The typed end of one unit of work. The value is the name used in reports and JSON output."""

    COMPLETED = "completed"
    """The agent finished and, when there is a reward/eval function, it returned a score."""
    AGENT_ERROR = "agent_error"
    """The agent's own code failed or reported an error."""
    MODEL_ERROR = "model_error"
    """The model provider refused or failed a call for this unit (bad request, unusable reply)."""
    INFRA_ERROR = "infra_error"
    """The unit could not run: a server did not answer or refused to start it, a provider is unusable."""
    TIMEOUT = "timeout"
    """The unit did not finish within its time limit."""
    NO_MODEL_CALLS = "no_model_calls"
    """The agent finished without ever calling the model, so its result says nothing about the model."""
    REWARD_ERROR = "reward_error"
    """The agent finished but the reward or eval function raised or returned no usable score."""
    REWARD_TIMEOUT = "reward_timeout"
    """The reward or eval function did not return within its time limit (it was stopped, not scored)."""
    REWARD_CRASH = "reward_crash"
    """The reward or eval function took its process down (exit, fatal signal) or ran out of memory."""

    @property
    def is_infrastructure(self) -> bool:
        """Whether this outcome means the run's machinery failed rather than the thing under test."""
        return self in INFRASTRUCTURE

    def __str__(self) -> str:
        return self.value


INFRASTRUCTURE = frozenset({Outcome.INFRA_ERROR, Outcome.TIMEOUT})


@dataclass(frozen=True)
class OutcomeCounts:
    """How many units of a run ended in each outcome."""

    counts: Mapping[Outcome, int] = field(default_factory=dict)

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> OutcomeCounts:
        return cls(dict(Counter(outcomes)))

    def __getitem__(self, outcome: Outcome) -> int:
        return self.counts.get(outcome, 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def completed(self) -> int:
        return self[Outcome.COMPLETED]

    @property
    def failed(self) -> int:
        return self.total - self.completed

    @property
    def infrastructure(self) -> int:
        return sum(self[o] for o in INFRASTRUCTURE)

    @property
    def failure_rate(self) -> float:
        return self.failed / self.total if self.total else 0.0

    def failures(self) -> str:
        """The failed outcomes with their counts, in the order of :class:`Outcome`: ``"agent_error 2, timeout 1"``."""
        return ", ".join(f"{o.value} {self[o]}" for o in Outcome if o is not Outcome.COMPLETED and self[o])

    def describe(self, unit: str) -> str:
        """One line: ``"10 rollouts: 8 completed (80.0%), agent_error 1, timeout 1"``."""
        total = self.total
        rate = f" ({self.completed / total:.1%})" if total else ""
        line = f"{total} {plural(unit, total)}: {self.completed} completed{rate}"
        failures = self.failures()
        return f"{line}, {failures}" if failures else line

    def to_dict(self) -> dict[str, int]:
        """Every outcome with its count (zeros included), keyed by the outcome's value."""
        return {o.value: self[o] for o in Outcome}


def plural(unit: str, count: int) -> str:
    """``unit`` for one, ``units`` for any other count."""
    return unit if count == 1 else f"{unit}s"


def verdict(
    counts: OutcomeCounts,
    *,
    max_failure_rate: float = 0.0,
    unit: str = "row",
    limit_name: str = "the allowed failure rate",
) -> str | None:
    """Why the run failed, as one sentence, or ``None`` when it passed.

    ``max_failure_rate`` is a fraction in ``[0, 1]``. ``unit`` names what was counted (``"rollout"``,
    ``"judgment"``) and ``limit_name`` how the caller lets users set the limit (a flag name).
    """
    if not 0.0 <= max_failure_rate <= 1.0:
        raise ValueError(f"max_failure_rate must be between 0 and 1, got {max_failure_rate!r}")
    total = counts.total
    if total == 0:
        return None
    if counts.infrastructure:
        n = counts.infrastructure
        return (
            f"{n} of {total} {plural(unit, total)} ended in an infrastructure failure "
            f"({counts.failures()}); their results are not scores"
        )
    if counts.completed == 0:
        everything = f"the {unit}" if total == 1 else f"all {total} {unit}s"
        return f"{everything} failed ({counts.failures()})"
    if counts.failure_rate > max_failure_rate:
        return (
            f"{counts.failed} of {total} {plural(unit, total)} failed ({counts.failures()}): "
            f"failure rate {counts.failure_rate:.1%} is above {limit_name} {max_failure_rate:.1%}"
        )
    return None
