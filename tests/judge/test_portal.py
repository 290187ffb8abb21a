"""The blocking twins of the judge's coroutine functions: same parameters, same results and errors."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from osmosis_ai.judge.batch import aevaluate_rubric_batch, evaluate_rubric_batch
from osmosis_ai.judge.evaluate import aevaluate_rubric, evaluate_rubric
from osmosis_ai.judge.portal import synchronous


async def _scale(value: float, *, factor: float = 2.0) -> float:
    await asyncio.sleep(0)
    if factor < 0:
        raise ValueError("negative factor")
    return value * factor


def test_twin_takes_the_same_parameters_and_returns_the_result() -> None:
    scale = synchronous(_scale, "scale", "Blocking _scale.")
    assert inspect.signature(scale) == inspect.signature(_scale)
    assert (scale.__name__, scale.__doc__) == ("scale", "Blocking _scale.")
    assert not inspect.iscoroutinefunction(scale)
    assert scale(3) == 6 and scale(value=3, factor=3) == 9
    with pytest.raises(ValueError, match="negative factor"):
        scale(1, factor=-1)


async def test_twin_works_inside_a_running_event_loop() -> None:
    assert synchronous(_scale, "scale", "")(2, factor=5) == 10


@pytest.mark.parametrize(
    ("sync", "coroutine_function"),
    [(evaluate_rubric, aevaluate_rubric), (evaluate_rubric_batch, aevaluate_rubric_batch)],
)
def test_public_twins_match_their_coroutine_functions(sync, coroutine_function) -> None:
    assert inspect.signature(sync) == inspect.signature(coroutine_function)
    assert sync.__name__ == coroutine_function.__name__.removeprefix("a")
