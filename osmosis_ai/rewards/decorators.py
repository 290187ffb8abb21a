"""The public reward decorators, ``@osmosis_reward`` and ``@osmosis_rubric``.

Both share one mechanism: read the function's shape and check its signature once
(:mod:`osmosis_ai.rewards.signature`), then wrap it in a lean sync or async wrapper that strips an
unwanted ``data_source=`` and checks the result (:mod:`osmosis_ai.rewards.wrappers`). They differ
only in the :class:`~osmosis_ai.rewards.signature.Contract` they enforce.

Those two modules are imported when the first function is decorated, not with this one: ``from
osmosis_ai import osmosis_reward`` must stay close to the cost of a bare interpreter start.
"""

from __future__ import annotations

TYPE_CHECKING = (
    False  # keeps typing off the start-up path (see benchmarks/startup.py); checkers read it as True
)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from osmosis_ai.rewards.signature import Contract

    F = TypeVar("F", bound=Callable[..., Any])


def osmosis_reward(func: F) -> F:
    """Validate a reward function when it is decorated and its score on every call.

    A *classic* reward is one whose first parameter is named ``solution_str``. It must look like::

        def my_reward(solution_str: str, ground_truth: str, extra_info: dict = None, **kwargs) -> float

    that is: at least three parameters, ``solution_str`` and ``ground_truth`` annotated exactly
    ``str``, ``extra_info`` annotated ``dict`` (or ``dict | None`` / ``Optional[dict]``) with a
    default. Further parameters are not checked; ``**kwargs`` is recommended so that new keywords
    from the platform do not break the function. String annotations (``from __future__ import
    annotations``) are resolved first. A breach raises
    :class:`~osmosis_ai.errors.RewardSignatureError` (a ``TypeError``) at decoration time.

    Each call must return a finite real number: a ``float``, or an ``int`` or other
    ``numbers.Real`` (returned as ``float``). ``bool``, NaN, infinities, ``None``, strings and
    other types raise :class:`~osmosis_ai.errors.RewardReturnError` naming the function.

    Any other signature (for instance ``(messages, ground_truth, **kwargs)``) is *free-form*: no
    parameter or return value is checked and the result is passed through unchanged.

    In both modes a ``data_source=`` keyword is dropped when the function accepts neither a
    ``data_source`` parameter nor ``**kwargs``. ``async def`` functions, async callable objects
    and ``functools.partial`` of them get an async wrapper that validates the awaited value. The
    wrapper carries the function's metadata (``__wrapped__``, so ``inspect.signature`` reports
    the original signature).
    """
    from osmosis_ai.rewards.signature import REWARD

    return _decorate(func, REWARD)


def osmosis_rubric(func: F) -> F:
    """Validate a rubric (LLM-judge) reward function when it is decorated and on every call.

    A *classic* rubric function, whose first parameter is named ``solution_str``, must look like::

        def my_rubric(solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs) -> float

    that is: at least three parameters, ``solution_str`` annotated ``str`` (or a subclass) without
    a default, ``ground_truth`` annotated ``str``, ``Optional[str]`` or ``str | None`` without a
    default, and the third parameter named ``extra_info``. A breach raises
    :class:`~osmosis_ai.errors.RewardSignatureError` at decoration time.

    Before each call the argument values are checked: ``solution_str`` must be a ``str``,
    ``ground_truth`` a ``str`` or ``None``, and ``extra_info`` must be given (``None`` is fine);
    otherwise :class:`~osmosis_ai.errors.RewardArgumentError` (a ``TypeError``) is raised. The
    result is checked as for :func:`osmosis_reward`.

    Free-form signatures, ``data_source`` dropping, async support and metadata are as for
    :func:`osmosis_reward`.
    """
    from osmosis_ai.rewards.signature import RUBRIC

    return _decorate(func, RUBRIC)


def _decorate(func: F, contract: Contract) -> F:
    """The body both decorators share: check ``func`` once, then wrap it for the call-time checks."""
    import functools

    from osmosis_ai.rewards.signature import read_shape
    from osmosis_ai.rewards.wrappers import argument_checked, async_wrapper, sync_wrapper

    shape = read_shape(func, contract)
    target: Callable[..., Any] = func
    if shape.classic and contract.checks_arguments:
        target = argument_checked(func, shape.signature, shape.name)
    build = async_wrapper if shape.is_async else sync_wrapper
    wrapper = build(
        target,
        function_name=shape.name,
        strips_data_source=shape.strips_data_source,
        checks_return=shape.classic,
    )
    functools.update_wrapper(wrapper, func)
    return wrapper  # type: ignore[return-value]
