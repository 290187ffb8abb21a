"""Call-time return check: classic functions return a finite real number, delivered as ``float``.

Every case runs through four doors: a sync and an async function, decorated as reward and as rubric.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from osmosis_ai import osmosis_reward, osmosis_rubric
from osmosis_ai.errors import RewardContractError, RewardReturnError


class Score(float):
    """A float subclass, as numpy's ``float64`` is."""


class Points(enum.IntEnum):
    TEN = 10


def returning(value: Any, *, decorator: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """A classic reward/rubric function called ``score_fn`` that returns ``value``."""
    if is_async:

        async def score_fn(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> Any:
            await asyncio.sleep(0)
            return value

    else:

        def score_fn(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> Any:
            return value

    return decorator(score_fn)


def call(func: Callable[..., Any]) -> Any:
    result = func("answer", "answer", None)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


DOORS = [
    pytest.param(osmosis_reward, False, id="reward-sync"),
    pytest.param(osmosis_reward, True, id="reward-async"),
    pytest.param(osmosis_rubric, False, id="rubric-sync"),
    pytest.param(osmosis_rubric, True, id="rubric-async"),
]

# (returned value, expected float)
GOOD = [
    (0.75, 0.75),
    (0.0, 0.0),
    (-2.5, -2.5),
    (1e308, 1e308),
    (1, 1.0),
    (0, 0.0),
    (-3, -3.0),
    (Fraction(1, 4), 0.25),
    (Score(0.5), 0.5),
    (Points.TEN, 10.0),
]

# (returned value, text the message shows for it)
BAD = [
    (True, "True of type bool"),
    (False, "False of type bool"),
    (float("nan"), "nan of type float"),
    (float("inf"), "inf of type float"),
    (float("-inf"), "-inf of type float"),
    (Score("inf"), "of type Score"),
    (None, "None of type NoneType"),
    ("1.0", "'1.0' of type str"),
    (Decimal("1.0"), "Decimal('1.0') of type Decimal"),
    ([1.0], "[1.0] of type list"),
    (complex(1, 0), "(1+0j) of type complex"),
    (10**400, "of type int"),  # too large for a float
    ("x" * 500, "xx... of type str"),  # long values are shortened
]


@pytest.mark.parametrize(("decorator", "is_async"), DOORS)
@pytest.mark.parametrize(("value", "expected"), GOOD, ids=repr)
def test_real_numbers_come_back_as_float(
    value: Any, expected: float, decorator: Callable[..., Any], is_async: bool
) -> None:
    result = call(returning(value, decorator=decorator, is_async=is_async))
    assert type(result) is float
    assert result == expected


@pytest.mark.parametrize(("decorator", "is_async"), DOORS)
@pytest.mark.parametrize(("value", "shown"), BAD, ids=lambda value: repr(value)[:20])
def test_anything_else_is_refused(
    value: Any, shown: str, decorator: Callable[..., Any], is_async: bool
) -> None:
    with pytest.raises(RewardReturnError) as caught:
        call(returning(value, decorator=decorator, is_async=is_async))
    message = str(caught.value)
    assert "'score_fn' must return a finite real number" in message
    assert shown in message
    assert len(message) < 300
    assert caught.value.function_name == "score_fn"


def test_return_error_is_catchable_as_0_2_and_as_value_error() -> None:
    with pytest.raises(TypeError):  # 0.2 raised TypeError for a non-float
        call(returning(None, decorator=osmosis_reward, is_async=False))
    with pytest.raises(ValueError):
        call(returning(float("nan"), decorator=osmosis_reward, is_async=False))
    assert issubclass(RewardReturnError, RewardContractError)


def test_sync_function_returning_an_awaitable_gets_a_hint() -> None:
    async def compute() -> float:
        return 1.0

    created = []

    @osmosis_reward
    def lazy(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> Any:
        created.append(compute())
        return created[-1]

    with pytest.raises(RewardReturnError, match="declare it `async def`"):
        lazy("a", "b")
    created[0].close()  # never awaited: close it so that no "never awaited" warning is left behind


@pytest.mark.parametrize("decorator", [osmosis_reward, osmosis_rubric])
@pytest.mark.parametrize("value", [None, "text", True, float("nan"), {"score": 1}, 3], ids=repr)
def test_free_form_results_pass_through_unchanged(decorator: Callable[..., Any], value: Any) -> None:
    @decorator
    def judge(messages: list, ground_truth: str, **kwargs: Any) -> Any:
        return value

    @decorator
    async def ajudge(messages: list, ground_truth: str, **kwargs: Any) -> Any:
        return value

    assert judge([], "x") is value
    assert asyncio.run(ajudge([], "x")) is value
