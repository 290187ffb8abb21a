"""Eval functions: user code that scores a finished row, in one of two shapes.

The shape is read from the function's first parameter (through decorators that set
``__wrapped__``, such as ``@osmosis_reward``):

* **simple** — ``fn(solution_str, ground_truth, extra_info)``: ``solution_str`` is the content of the
  last assistant message that has any (``""`` when none), ``extra_info`` the row's metadata;
* **full** — ``fn(messages, ground_truth, metadata)``: the whole final conversation.

Async functions are awaited; plain ones run in a worker thread, so a slow scorer does not stall the
other rows. The score must be a finite real number (``bool`` is refused: ``True`` is not a score);
anything else raises :class:`EvalFnError`. An exception from the function itself propagates, so the
caller records the row as a ``reward_error`` instead of a score of 0.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from osmosis_ai.evaluation.errors import EvalFnError

SIMPLE = "simple"
FULL = "full"


def _mode(fn: Callable[..., Any], name: str) -> str:
    try:
        parameters = list(inspect.signature(fn).parameters)  # follows __wrapped__
    except (TypeError, ValueError) as exc:
        raise EvalFnError(f"eval function {name!r}: cannot read its signature: {exc}") from exc
    first = parameters[0] if parameters else None
    if first == "solution_str":
        return SIMPLE
    if first == "messages":
        return FULL
    raise EvalFnError(
        f"eval function {name!r} takes ({', '.join(parameters)}); its first parameter must be "
        "'solution_str' (fn(solution_str, ground_truth, extra_info)) or 'messages' "
        "(fn(messages, ground_truth, metadata))"
    )


def last_assistant_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The content of the last assistant message that has content, as text (``""`` when none)."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("content") is not None:
            return str(message["content"])
    return ""


def _is_async(fn: Callable[..., Any]) -> bool:
    target = inspect.unwrap(fn)
    call = getattr(target, "__call__", None)  # noqa: B004 - a callable object's async __call__
    return inspect.iscoroutinefunction(target) or (
        not inspect.isfunction(target) and call is not None and inspect.iscoroutinefunction(call)
    )


class EvalFnWrapper:
    """Calls ``fn`` in its shape and checks its score; ``name`` identifies it in errors and reports."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        if not callable(fn):
            raise EvalFnError(f"eval function {name!r} is a {type(fn).__name__}, not a callable")
        self.fn = fn
        self.name = name
        self.mode = _mode(fn, name)

    async def __call__(
        self, messages: Sequence[Mapping[str, Any]], ground_truth: Any, metadata: Mapping[str, Any]
    ) -> float:
        if self.mode == SIMPLE:
            kwargs: dict[str, Any] = {
                "solution_str": last_assistant_text(messages),
                "ground_truth": ground_truth,
                "extra_info": dict(metadata),
            }
        else:
            kwargs = {"messages": list(messages), "ground_truth": ground_truth, "metadata": dict(metadata)}
        if _is_async(self.fn):
            value = await self.fn(**kwargs)
        else:
            value = await asyncio.to_thread(self.fn, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise EvalFnError(
                f"eval function {self.name!r} returned {value!r}; it must return a finite number"
            )
        return float(value)
