"""Trainer-side rewards: a ``MODULE:FN`` with the classic ``(solution_str, ground_truth, extra_info)`` signature.

The reward is computed on the content of the last assistant message (the convention of 0.2's
``osmosis eval`` simple mode). Synchronous functions run in a worker thread so a slow reward never
stalls the gateway; coroutine functions are awaited.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable
from typing import Any

from osmosis_ai.errors import CLIError
from osmosis_ai.traingate.errors import LoadError

RewardFn = Callable[..., Any]


def load_reward(spec: str) -> RewardFn:
    """Load a reward function (``module.path:fn``, the working directory first on ``sys.path``)."""
    from osmosis_ai.rollout.cli_utils import load_attribute

    try:
        fn = load_attribute(spec, what="reward function", example="e.g. 'my_rewards:score'")
    except CLIError as exc:
        raise LoadError(str(exc)) from exc
    if not callable(fn):
        raise LoadError(f"reward function {spec!r} is a {type(fn).__name__}, not a callable")
    return fn


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
        raise TypeError(f"the reward function returned {value!r}; it must return a finite number")
    return float(value)
