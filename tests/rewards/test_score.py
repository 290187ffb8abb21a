"""The one score rule, applied the same way by every path that scores."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from osmosis_ai import osmosis_reward
from osmosis_ai.errors import RewardReturnError
from osmosis_ai.rewards.eval_fn import EvalFnWrapper
from osmosis_ai.rewards.score import to_score
from osmosis_ai.traingate.reward import compute_reward

MESSAGES = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


def _returning(value: Any) -> Callable[..., Any]:
    def reward(solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any) -> Any:
        return value

    return reward


async def _decorated(value: Any) -> float:
    result: float = osmosis_reward(_returning(value))("4", "4", {})
    return result


async def _eval_fn(value: Any) -> float:
    return await EvalFnWrapper(_returning(value), "reward")(MESSAGES, "4", {})


async def _trainer_side(value: Any) -> float:
    return await compute_reward(_returning(value), MESSAGES, "4", {})


PATHS: list[Callable[[Any], Awaitable[float]]] = [_decorated, _eval_fn, _trainer_side]


@pytest.mark.parametrize("path", PATHS, ids=["decorator", "eval-fn", "rollout-run-reward"])
@pytest.mark.parametrize(
    ("value", "score"),
    [(0.5, 0.5), (1, 1.0), (np.float32(0.5), 0.5), (np.int64(3), 3.0), (Fraction(1, 4), 0.25), (-0.0, 0.0)],
)
async def test_real_numbers_are_scores(
    path: Callable[[Any], Awaitable[float]], value: Any, score: float
) -> None:
    result = await path(value)
    assert result == score and type(result) is float


@pytest.mark.parametrize("path", PATHS, ids=["decorator", "eval-fn", "rollout-run-reward"])
@pytest.mark.parametrize(
    "value", [True, False, np.bool_(True), float("nan"), float("inf"), np.float64("-inf"), None, "1", 10**400]
)
async def test_everything_else_is_refused_with_the_same_message(
    path: Callable[[Any], Awaitable[float]], value: Any
) -> None:
    with pytest.raises(RewardReturnError) as caught:
        await path(value)
    message = str(caught.value)
    assert "'reward' must return a finite real number (a float, or an int), got " in message
    if isinstance(value, bool):
        assert "a bool is not a score" in message


def test_an_awaitable_gets_the_hint_to_declare_the_function_async() -> None:
    async def later() -> float:
        return 1.0

    coroutine = later()
    with pytest.raises(RewardReturnError, match="declare it `async def`"):
        to_score(coroutine, "reward")
    coroutine.close()
