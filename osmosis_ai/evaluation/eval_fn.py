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

from osmosis_ai._usercode import UserThreads, call_user
from osmosis_ai.evaluation.errors import EvalFnError
from osmosis_ai.rewards.score import to_score

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
        *,
        threads: UserThreads | None = None,
    ) -> float:
        if self.mode == SIMPLE:
            kwargs: dict[str, Any] = {
                "solution_str": last_assistant_text(messages),
                "ground_truth": ground_truth,
                "extra_info": dict(metadata),
            }
        else:
            kwargs = {"messages": list(messages), "ground_truth": ground_truth, "metadata": dict(metadata)}
        value = await call_user(self.fn, threads=threads, **kwargs)
        return to_score(value, self.name, kind="eval function")
