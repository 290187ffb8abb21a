"""Trainer-side rewards: a function with the classic ``(solution_str, ground_truth, extra_info)`` signature.

The reward is computed on the content of the last assistant message, the convention of
``osmosis eval``'s simple mode, called the way all user code is called
(:func:`osmosis_ai._usercode.call_user`) and checked by the score rule
(:func:`osmosis_ai.rewards.score.to_score`). (``osmosis rollout run --reward MODULE:FN`` loads the
function: :func:`osmosis_ai.rollout.loading.load_function`.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from osmosis_ai._usercode import UserThreads, call_user
from osmosis_ai.rewards.eval_fn import last_assistant_text
from osmosis_ai.rewards.score import to_score

RewardFn = Callable[..., Any]


async def compute_reward(
    fn: RewardFn,
    messages: list[dict[str, Any]],
    ground_truth: str,
    extra_info: dict[str, Any],
    *,
    threads: UserThreads | None = None,
) -> float:
    """Call ``fn(solution_str, ground_truth, extra_info)`` and check its score."""
    value = await call_user(fn, last_assistant_text(messages), ground_truth, extra_info, threads=threads)
    return to_score(value, getattr(fn, "__name__", "") or type(fn).__name__)
