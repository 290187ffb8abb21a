"""Trainer-side rewards: a ``MODULE:FN`` with the classic ``(solution_str, ground_truth, extra_info)`` signature.

The reward is computed on the content of the last assistant message (the convention of 0.2's
``osmosis eval`` simple mode). Synchronous functions run in a worker thread so a slow reward never
stalls the gateway; coroutine functions are awaited.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from osmosis_ai.traingate.errors import LoadError

RewardFn = Callable[..., Any]


def load_object(spec: str, what: str) -> Any:
    """Import ``module.path:attr`` (the working directory first on ``sys.path``) and return the attribute."""
    module_path, sep, attr = spec.rpartition(":")
    if not sep or not module_path or not attr:
        raise LoadError(f"invalid {what} {spec!r}: expected 'module.path:name', e.g. 'my_rewards:score'")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_path)
    except Exception as exc:
        raise LoadError(f"cannot import {what} module {module_path!r}: {type(exc).__name__}: {exc}") from exc
    if not hasattr(module, attr):
        raise LoadError(f"module {module_path!r} has no attribute {attr!r} (the {what} {spec!r})")
    return getattr(module, attr)


def load_reward(spec: str) -> RewardFn:
    """Load a reward function; it must be callable."""
    fn = load_object(spec, "reward function")
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
