"""The score rule: what a reward, rubric or eval function may return, and the message when it may not.

A score is a finite real number. ``int`` and other ``numbers.Real`` types (``Fraction``, numpy
scalars such as ``np.float32(0.5)``) come back as ``float``. ``bool`` is refused although it is an
``int`` subclass: a reward that returns ``True`` almost always meant to return a score and forgot
to, and reading it as ``1.0`` would hide that. NaN, the infinities, ``None``, strings and awaitables
are refused too. Every path that scores (the reward decorators, ``osmosis eval --eval-fn``,
``osmosis rollout run --reward``, the agent's own reward) applies this rule through :func:`to_score`.

A finite float ``r`` is recognised by ``r - r == 0.0``, which is false for NaN and both infinities.

There is one of it: ``tests/test_one_of_each.py::test_one_score_rule``.
"""

from __future__ import annotations

import numbers

from osmosis_ai.errors import RewardReturnError

_REPR_LIMIT = 120


def to_score(value: object, function_name: str, *, kind: str = "reward function") -> float:
    """``value`` as a finite ``float``, or :class:`~osmosis_ai.errors.RewardReturnError` saying why not.

    ``kind`` names what returned it in the message (``"reward function"``, ``"eval function"``); with
    an empty ``function_name`` the message names ``kind`` alone (``"the agent's reward"``).
    """
    if type(value) is float and value - value == 0.0:
        return value
    if type(value) is int or (isinstance(value, numbers.Real) and not isinstance(value, bool)):
        try:
            score = float(value)
        except (OverflowError, TypeError, ValueError):
            score = float("nan")
        if score - score == 0.0:
            return score
    raise RewardReturnError(return_problem(value, function_name, kind), function_name=function_name)


def agent_reward(value: object) -> float | None:
    """The reward an agent reports (``ctx.complete(..., reward=value)``) by the score rule: ``None`` when
    it reported none, else :func:`to_score`'s finite ``float`` or its refusal naming the agent's reward."""
    return None if value is None else to_score(value, "", kind="the agent's reward")


def return_problem(value: object, function_name: str, kind: str = "reward function") -> str:
    """Why ``value`` is not a score, in one sentence naming the function."""
    if function_name:
        problem = f"{kind} {function_name!r} must return a finite real number (a float, or an int)"
    else:
        problem = f"{kind} must be a finite real number (a float, or an int)"
    problem += f", got {describe_value(value)}"
    if isinstance(value, bool):
        problem += "; a bool is not a score: return 1.0 or 0.0"
    elif hasattr(value, "__await__"):
        problem += "; it returned an awaitable, so declare it `async def` to have it awaited"
    return problem


def describe_value(value: object) -> str:
    """``repr(value)`` (shortened) and its type name, for error messages."""
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{text} of type {type(value).__name__}"
