"""Eval functions: user code that scores a finished row, in one of two shapes.

The shape is read from the function's first parameter (through decorators that set
``__wrapped__``, such as ``@osmosis_reward``):

* **simple** — ``fn(solution_str, ground_truth, extra_info)``: ``solution_str`` is the content of the
  last assistant message that has any (``""`` when none), ``extra_info`` the row's metadata;
* **full** — ``fn(messages, ground_truth, metadata)``: the whole final conversation.

Functions are called the one way (:func:`osmosis_ai._usercode.call_user`: async ones awaited, plain
ones in worker threads, so a slow scorer does not stall the other rows). The score follows the one
score rule (:func:`osmosis_ai.rewards.score.to_score`): anything but a finite real number raises
:class:`~osmosis_ai.errors.RewardReturnError`. An exception from the function itself propagates, so
the caller records the row as a ``reward_error`` instead of a score of 0.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from osmosis_ai._usercode import call_user
from osmosis_ai.errors import EvaluationError
from osmosis_ai.rewards.score import to_score


class EvalFnError(EvaluationError):
    """An eval function has a shape ``osmosis eval`` cannot call, or returned something that is not a score."""


SIMPLE = "simple"
FULL = "full"
PARAMETERS = {
    SIMPLE: ("solution_str", "ground_truth", "extra_info"),
    FULL: ("messages", "ground_truth", "metadata"),
}
"""The parameters each shape is called with, by keyword, in this order."""
SHAPES = "'solution_str' (fn(solution_str, ground_truth, extra_info)) or 'messages' (fn(messages, ground_truth, metadata))"
"""The two shapes, as error messages name them."""


def shape_of(parameters: list[str]) -> str | None:
    """The shape a function with these parameter names is called in, or ``None`` when it fits neither."""
    first = parameters[0] if parameters else None
    return next((mode for mode, names in PARAMETERS.items() if names[0] == first), None)


def _mode(fn: Callable[..., Any], name: str) -> str:
    try:
        parameters = list(inspect.signature(fn).parameters)  # follows __wrapped__
    except (TypeError, ValueError) as exc:
        raise EvalFnError(f"eval function {name!r}: cannot read its signature: {exc}") from exc
    mode = shape_of(parameters)
    if mode is None:
        raise EvalFnError(
            f"eval function {name!r} takes ({', '.join(parameters)}); its first parameter must be {SHAPES}"
        )
    return mode


def last_assistant_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The content of the last assistant message that has content, as text (``""`` when none)."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("content") is not None:
            return str(message["content"])
    return ""


class EvalFnWrapper:
    """Calls ``fn`` in its shape and checks its score; ``name`` identifies it in errors and reports."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        if not callable(fn):
            raise EvalFnError(f"eval function {name!r} is a {type(fn).__name__}, not a callable")
        self.fn = fn
        self.name = name
        self.mode = _mode(fn, name)

    async def __call__(
        self,
        messages: Sequence[Mapping[str, Any]],
        ground_truth: Any,
        metadata: Mapping[str, Any],
    ) -> float:
        if self.mode == SIMPLE:
            values: tuple[Any, ...] = (last_assistant_text(messages), ground_truth, dict(metadata))
        else:
            values = (list(messages), ground_truth, dict(metadata))
        kwargs = dict(zip(PARAMETERS[self.mode], values, strict=True))
        value = await call_user(self.fn, **kwargs)
        return to_score(value, self.name, kind="eval function")
