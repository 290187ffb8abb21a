"""Call-time half of the reward decorators: the wrappers that run on every reward call.

Rewards are called once per sample during training, so the wrappers are built for speed: every
decision is taken when the decorator runs, the common call (positional arguments, a ``float``
result) takes one branch for ``data_source`` and one type test, and anything slower (ints,
``numbers.Real`` types such as ``Fraction`` or numpy scalars, errors) is left to the score rule,
:func:`osmosis_ai.rewards.score.to_score`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from osmosis_ai.errors import RewardArgumentError
from osmosis_ai.rewards.score import describe_value, to_score


def sync_wrapper(
    func: Callable[..., Any], *, function_name: str, strips_data_source: bool, checks_return: bool
) -> Callable[..., Any]:
    """A plain wrapper that drops an unwanted ``data_source=`` and, for classic functions, turns
    the result into a finite ``float`` or raises :class:`~osmosis_ai.errors.RewardReturnError`."""
    if not checks_return:

        def free_form(*args: Any, **kwargs: Any) -> Any:
            if kwargs and strips_data_source and "data_source" in kwargs:
                del kwargs["data_source"]
            return func(*args, **kwargs)

        return free_form

    def classic(*args: Any, **kwargs: Any) -> float:
        if kwargs and strips_data_source and "data_source" in kwargs:
            del kwargs["data_source"]
        result = func(*args, **kwargs)
        if type(result) is float and result - result == 0.0:
            return result
        return to_score(result, function_name)

    return classic


def async_wrapper(
    func: Callable[..., Any], *, function_name: str, strips_data_source: bool, checks_return: bool
) -> Callable[..., Any]:
    """The ``async def`` twin of :func:`sync_wrapper`: awaits ``func`` and checks the awaited value."""
    if not checks_return:

        async def free_form(*args: Any, **kwargs: Any) -> Any:
            if kwargs and strips_data_source and "data_source" in kwargs:
                del kwargs["data_source"]
            return await func(*args, **kwargs)

        return free_form

    async def classic(*args: Any, **kwargs: Any) -> float:
        if kwargs and strips_data_source and "data_source" in kwargs:
            del kwargs["data_source"]
        result = await func(*args, **kwargs)
        if type(result) is float and result - result == 0.0:
            return result
        return to_score(result, function_name)

    return classic


def argument_checked(
    func: Callable[..., Any], signature: inspect.Signature, function_name: str
) -> Callable[..., Any]:
    """``func`` behind a check of the rubric argument values, done before every call.

    ``solution_str`` must be a ``str``, ``ground_truth`` a ``str`` or ``None``, and ``extra_info``
    present (any value). The check returns what ``func`` returns, so it also sits in front of an
    async function, whose coroutine the async wrapper then awaits.
    """

    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError as exc:
            raise RewardArgumentError(
                f"rubric function {function_name!r} was called with arguments its signature does not accept: {exc}",
                function_name=function_name,
            ) from exc
        bound.apply_defaults()
        problem = _argument_problem(bound.arguments)
        if problem:
            raise RewardArgumentError(
                f"rubric function {function_name!r}: {problem}", function_name=function_name
            )
        return func(*args, **kwargs)

    return checked


def _argument_problem(arguments: dict[str, Any]) -> str:
    """What is wrong with the bound rubric arguments (the first problem, in a fixed order), or ``""``."""
    if "solution_str" not in arguments:
        return "argument 'solution_str' is missing"
    solution = arguments["solution_str"]
    if not isinstance(solution, str):
        return f"argument 'solution_str' must be a str, got {describe_value(solution)}"
    if "ground_truth" not in arguments:
        return "argument 'ground_truth' is missing"
    truth = arguments["ground_truth"]
    if truth is not None and not isinstance(truth, str):
        return f"argument 'ground_truth' must be a str or None, got {describe_value(truth)}"
    if "extra_info" not in arguments:
        return "argument 'extra_info' is missing (pass None when there is nothing to pass)"
    return ""
