"""Trainer-side rewards: a function with the classic ``(solution_str, ground_truth, extra_info)`` signature.

The reward is computed on the content of the last assistant message, the convention of
``osmosis eval``'s simple mode. Synchronous functions run in a worker thread so a slow reward never
stalls the gateway; coroutine functions are awaited. (``osmosis rollout run --reward MODULE:FN``
loads the function: :func:`osmosis_ai.cli.loading.load_reward`.)
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable
from typing import Any

from osmosis_ai.errors import RewardReturnError

RewardFn = Callable[..., Any]


def last_assistant_content(messages: list[dict[str, Any]]) -> str:
    """Content of the last assistant message whose content is not None, as text ("" if none)."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("content") is not None:
            return str(message["content"])
    return ""


async def compute_reward(
    fn: RewardFn, messages: list[dict[str, Any]], ground_truth: str, extra_info: dict[str, Any]
) -> float:
    """Call ``fn(solution_str, ground_truth, extra_info)`` and check it returns a finite number."""
    solution = last_assistant_content(messages)
    if inspect.iscoroutinefunction(fn):
        value = await fn(solution, ground_truth, extra_info)
    else:
        value = await asyncio.to_thread(fn, solution, ground_truth, extra_info)
        if inspect.isawaitable(value):
            value = await value
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RewardReturnError(
            f"the reward function returned {value!r}; it must return a finite number",
            function_name=getattr(fn, "__name__", ""),
        )
    return float(value)
