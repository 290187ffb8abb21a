"""Eval functions in their two shapes, called as ``osmosis eval`` will call them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from osmosis_ai import osmosis_reward
from osmosis_ai.errors import RewardReturnError
from osmosis_ai.rewards.eval_fn import FULL, SIMPLE, EvalFnError, EvalFnWrapper

MESSAGES = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "Let me add.", "tool_calls": [{"id": "1"}]},
    {"role": "tool", "content": "4"},
    {"role": "assistant", "content": None},
    {"role": "assistant", "content": "4"},
    {"role": "assistant", "content": None},
]


@osmosis_reward
def exact(solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any) -> float:
    return float(solution_str.strip() == ground_truth)


async def test_simple_mode_scores_the_last_assistant_text_through_a_decorator() -> None:
    wrapper = EvalFnWrapper(exact, "rewards:exact")
    assert wrapper.mode == SIMPLE
    assert await wrapper(MESSAGES, "4", {"row": 1}) == 1.0
    assert await wrapper([{"role": "user", "content": "hi"}], "4", {}) == 0.0


async def test_full_mode_gets_the_conversation_and_plain_functions_run_off_the_loop() -> None:
    seen: dict[str, Any] = {}

    def turns(messages: list[dict[str, Any]], ground_truth: str, metadata: dict[str, Any]) -> int:
        seen.update(thread=threading.current_thread(), metadata=metadata)
        return len(messages)

    wrapper = EvalFnWrapper(turns, "turns")
    assert wrapper.mode == FULL
    assert await wrapper(MESSAGES, "4", {"level": "easy"}) == 6.0
    assert seen["thread"] is not threading.main_thread() and seen["metadata"] == {"level": "easy"}

    async def is_async(messages: list[dict[str, Any]], ground_truth: str, metadata: dict[str, Any]) -> float:
        return 0.5

    assert await EvalFnWrapper(is_async, "a")(MESSAGES, "4", {}) == 0.5


@pytest.mark.parametrize("value", [True, "1", None, float("nan"), float("inf")])
async def test_a_non_score_is_refused(value: Any) -> None:
    def bad(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> Any:
        return value

    with pytest.raises(RewardReturnError, match="eval function 'bad' must return a finite real number"):
        await EvalFnWrapper(bad, "bad")(MESSAGES, "4", {})


async def test_shapes_that_cannot_be_called_and_errors_that_propagate() -> None:
    with pytest.raises(EvalFnError, match="first parameter must be 'solution_str'"):
        EvalFnWrapper(lambda answer, truth: 1.0, "lambda")
    with pytest.raises(EvalFnError, match="not a callable"):
        EvalFnWrapper(3, "three")  # type: ignore[arg-type]

    def broken(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
        raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError):  # the caller records a reward_error, not a 0
        await EvalFnWrapper(broken, "broken")(MESSAGES, "4", {})
