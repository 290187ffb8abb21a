"""The scorer: every finished item of every command is scored here, by the score rule.

Only an attempt that completed is scored; any other keeps its outcome and has no score, so a
failure is never a 0. A :class:`Scorer` holds the run's named score functions (:class:`ScoreFn`:
eval functions, a trainer-side reward) and where the item's ``reward`` comes from: the agent's own
(``reward="agent"``, the default) or one of the named functions. Every value goes through
:func:`osmosis_ai.rewards.score.to_score`: the agent's reported reward when it is the reward, and
every function's return. A function that raises or returns something else makes the item a
``reward_error`` with the reason (the others still run, so every error is reported at once).

The functions the commands score with run in the reward runtime (:func:`runtime_function`, over a
:class:`~osmosis_ai.rewards.runtime.RewardRuntime`): a reward that hangs is killed at its timeout
(``reward_timeout``), one that takes its worker down fails only its sample (``reward_crash``), and a
runtime that cannot score at all is the run's infrastructure failing (``infra_error``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from osmosis_ai._deadline import Deadline
from osmosis_ai._usercode import UserCodeRaised, UserThreads
from osmosis_ai.errors import InfrastructureError, RewardReturnError
from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.score import agent_reward, to_score
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt, Result

AGENT = "agent"


class ScoreFailure(Exception):
    """A score function failed in a typed way: the item ends in ``outcome`` with ``message``."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class ScoreFn:
    """A named function scoring a completed attempt; ``score(item, attempt, threads)`` returns a float."""

    name: str
    score: Callable[[WorkItem, Attempt, UserThreads | None], Awaitable[float]]


def reward_function(fn: Callable[..., Any], name: str = "reward") -> ScoreFn:
    """A classic ``fn(solution_str, ground_truth, extra_info)`` reward on the last assistant message."""
    from osmosis_ai.traingate.reward import compute_reward

    async def score(item: WorkItem, attempt: Attempt, threads: UserThreads | None) -> float:
        return await compute_reward(
            fn, attempt.final_messages, item.row["ground_truth"], dict(item.row), threads=threads
        )

    return ScoreFn(name, score)


def runtime_function(runtime: Any, name: str) -> ScoreFn:
    """Score with ``runtime`` (a started or startable :class:`~osmosis_ai.rewards.runtime.RewardRuntime`):
    the :class:`~osmosis_ai.rewards.runtime.Sample` the executor made (stored answers: the row's own
    columns), else the final conversation, the row's ground truth and the row as ``extra_info``."""
    from osmosis_ai.rewards.runtime import RewardInputError, RewardRuntimeError, Sample

    async def score(item: WorkItem, attempt: Attempt, threads: UserThreads | None) -> float:
        if isinstance(attempt.source, Sample):
            sample = attempt.source
        else:
            sample = Sample(
                item.row["ground_truth"], messages=attempt.final_messages, extra_info=dict(item.row)
            )
        try:
            result = await runtime.score(sample)
        except RewardInputError as exc:
            raise ScoreFailure(Outcome.REWARD_ERROR, str(exc)) from None
        except RewardRuntimeError as exc:  # closed, or workers that cannot start: the run's failure
            raise ScoreFailure(Outcome.INFRA_ERROR, f"the reward runtime cannot score: {exc}") from None
        if result.outcome is not Outcome.COMPLETED:
            raise ScoreFailure(result.outcome, result.error or result.outcome.value)
        value: float = result.score
        return value

    return ScoreFn(name, score)


def agent_function(name: str) -> ScoreFn:
    """The agent's own reported reward as a score named ``name`` (a 0.3 grader's, in ``osmosis eval``),
    by the score rule: an agent that reported none is a ``reward_error``, never a 0."""

    async def score(item: WorkItem, attempt: Attempt, threads: UserThreads | None) -> float:
        return to_score(attempt.agent_reward, "", kind="the agent's reward")

    return ScoreFn(name, score)


class Scorer:
    """Scores completed attempts (see the module docstring).

    ``reward`` is ``"agent"`` (the agent's reported reward is the item's reward) or the name of one
    of ``functions``. ``threads`` run the synchronous functions (default: the shared user threads).
    """

    def __init__(
        self,
        functions: Sequence[ScoreFn] = (),
        *,
        reward: str = AGENT,
        threads: UserThreads | None = None,
    ) -> None:
        names = [fn.name for fn in functions]
        if len(set(names)) != len(names):
            raise ValueError(f"score function names must differ, got {names}")
        if reward != AGENT and reward not in names:
            raise ValueError(f"reward {reward!r} names none of the score functions {names}")
        self.functions = list(functions)
        self.reward = reward
        self.threads = threads

    @property
    def names(self) -> list[str]:
        return [fn.name for fn in self.functions]

    async def score(self, item: WorkItem, attempt: Attempt, *, deadline: Deadline | None = None) -> Result:
        """The item's :class:`Result`; ``deadline`` bounds the scoring (what the agent left of it)."""
        if attempt.outcome is not Outcome.COMPLETED:
            return Result(item, attempt, attempt.outcome)
        result = Result(item, attempt, Outcome.COMPLETED)
        if self.reward == AGENT:
            if attempt.agent_reward_error is not None:
                result.score_errors["reward"] = attempt.agent_reward_error
            else:
                try:
                    result.reward = agent_reward(attempt.agent_reward)
                except RewardReturnError as exc:
                    result.score_errors["reward"] = str(exc)
        failed: Outcome | None = None
        for fn in self.functions:
            try:
                value = await _bounded(fn.score(item, attempt, self.threads), deadline)
                result.scores[fn.name] = to_score(value, fn.name)
            except ScoreFailure as exc:
                result.score_errors[fn.name] = str(exc)
                failed = failed or exc.outcome
            except asyncio.TimeoutError:
                seconds = f" of {deadline.seconds:g}s" if deadline else ""
                result.outcome = Outcome.TIMEOUT
                result.score_errors[fn.name] = (
                    f"{fn.name!r} did not return within the item's time limit{seconds}"
                )
                return result
            except InfrastructureError as exc:  # the scorer's machinery, not the answer: never a score
                result.score_errors[fn.name] = _describe(exc)
                failed = Outcome.INFRA_ERROR
            except Exception as exc:  # the user's scorer: this item's reward_error, never a 0
                result.score_errors[fn.name] = _describe(exc)
        if self.reward != AGENT:
            result.reward = result.scores.get(self.reward)
        if result.score_errors:
            result.outcome = failed or Outcome.REWARD_ERROR
        return result


def _describe(exc: BaseException) -> str:
    if isinstance(exc, (RewardReturnError, UserCodeRaised)):
        return str(exc)  # already says what was wrong (UserCodeRaised: "SystemExit: 3")
    return f"{type(exc).__name__}: {exc}"


async def _bounded(call: Awaitable[float], deadline: Deadline | None) -> float:
    if deadline is None:
        return await call
    return await asyncio.wait_for(call, deadline.remaining())
