"""The call-time wrappers: ``data_source`` dropping, rubric argument checks, async detection, metadata,
and the return check (classic functions return a finite real number, delivered as ``float``)."""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import osmosis_ai.utils
import pytest

import osmosis_ai
import osmosis_ai.rewards
from osmosis_ai import osmosis_reward, osmosis_rubric
from osmosis_ai.errors import RewardArgumentError, RewardContractError, RewardReturnError

BOTH = [pytest.param(osmosis_reward, id="reward"), pytest.param(osmosis_rubric, id="rubric")]


def run(result: Any) -> Any:
    return asyncio.run(result) if inspect.isawaitable(result) else result


# --- data_source ---------------------------------------------------------------------------------


def make_receivers(seen: list[dict[str, Any]]) -> dict[str, Callable[..., Any]]:
    """Functions that record the keywords they receive, keyed by the shape of their signature."""

    def classic(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        seen.append({})
        return 1.0

    def classic_with_param(
        solution_str: str, ground_truth: str, extra_info: dict | None = None, data_source: str = ""
    ) -> float:
        seen.append({"data_source": data_source})
        return 1.0

    def classic_with_kwargs(
        solution_str: str, ground_truth: str, extra_info: dict | None = None, **kw: Any
    ) -> float:
        seen.append(kw)
        return 1.0

    def free_form(messages: Any, ground_truth: Any, extra_info: Any = None) -> float:
        seen.append({})
        return 1.0

    def free_form_with_kwargs(messages: Any, ground_truth: Any, extra_info: Any = None, **kw: Any) -> float:
        seen.append(kw)
        return 1.0

    async def async_classic(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        seen.append({})
        return 1.0

    async def async_with_kwargs(
        solution_str: str, ground_truth: str, extra_info: dict | None = None, **kw: Any
    ) -> float:
        seen.append(kw)
        return 1.0

    return {f.__name__: f for f in (classic, classic_with_param, classic_with_kwargs, free_form,
                                   free_form_with_kwargs, async_classic, async_with_kwargs)}  # fmt: skip


# (function, keywords it receives when called with data_source="gsm8k")
DATA_SOURCE = [
    ("classic", {}),
    ("classic_with_param", {"data_source": "gsm8k"}),
    ("classic_with_kwargs", {"data_source": "gsm8k"}),
    ("free_form", {}),
    ("free_form_with_kwargs", {"data_source": "gsm8k"}),
    ("async_classic", {}),
    ("async_with_kwargs", {"data_source": "gsm8k"}),
]


@pytest.mark.parametrize("decorator", BOTH)
@pytest.mark.parametrize(("name", "received"), DATA_SOURCE)
def test_data_source_dropped_only_when_unwanted(
    decorator: Callable[..., Any], name: str, received: dict[str, Any]
) -> None:
    seen: list[dict[str, Any]] = []
    func = decorator(make_receivers(seen)[name])
    assert run(func("answer", "answer", None, data_source="gsm8k")) == 1.0
    assert run(func("answer", "answer", None)) == 1.0
    assert seen[0] == received
    assert seen[1] in ({}, {"data_source": ""})


@pytest.mark.parametrize("decorator", BOTH)
@pytest.mark.parametrize("name", ["classic", "free_form", "async_classic"])
def test_other_unknown_keywords_still_fail(decorator: Callable[..., Any], name: str) -> None:
    func = decorator(make_receivers([])[name])
    with pytest.raises(TypeError, match="source"):
        run(func("answer", "answer", None, source="gsm8k"))


# --- argument values -----------------------------------------------------------------------------

# (args, kwargs, error fragment or None when the call is fine)
RUBRIC_CALLS: list[tuple[tuple[Any, ...], dict[str, Any], str | None]] = [
    (("out", "ref", {}), {}, None),
    (("out", None, None), {}, None),
    ((), {"solution_str": "out", "ground_truth": "ref", "extra_info": None}, None),
    (("out", "ref", None), {"data_source": "gsm8k", "model": "m"}, None),
    ((1, "ref", {}), {}, "argument 'solution_str' must be a str, got 1 of type int"),
    ((None, "ref", {}), {}, "argument 'solution_str' must be a str, got None of type NoneType"),
    (("out", 2.5, {}), {}, "argument 'ground_truth' must be a str or None, got 2.5 of type float"),
    (("out", ["ref"], {}), {}, "argument 'ground_truth' must be a str or None, got ['ref'] of type list"),
    (("out", "ref"), {}, "argument 'extra_info' is missing"),
    (("out",), {}, "argument 'ground_truth' is missing"),
    ((), {"ground_truth": "ref", "extra_info": {}}, "argument 'solution_str' is missing"),
    (("out", "ref", {}, "extra"), {}, "signature does not accept: too many positional arguments"),
    (("out", "ref", {}), {"solution_str": "again"}, "signature does not accept: multiple values"),
]


def make_rubric(calls: list[tuple[Any, ...]], *, is_async: bool) -> Callable[..., Any]:
    if is_async:

        async def judge(
            solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs: Any
        ) -> float:
            calls.append((solution_str, ground_truth, extra_info))
            return 0.5

        return osmosis_rubric(judge)

    def judge_sync(solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs: Any) -> float:
        calls.append((solution_str, ground_truth, extra_info))
        return 0.5

    return osmosis_rubric(judge_sync)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(("args", "kwargs", "problem"), RUBRIC_CALLS)
def test_rubric_checks_argument_values_before_calling(
    args: tuple[Any, ...], kwargs: dict[str, Any], problem: str | None, is_async: bool
) -> None:
    calls: list[tuple[Any, ...]] = []
    judge = make_rubric(calls, is_async=is_async)
    if problem is None:
        assert run(judge(*args, **kwargs)) == 0.5
        assert len(calls) == 1
        return
    with pytest.raises(RewardArgumentError) as caught:
        run(judge(*args, **kwargs))
    assert problem in str(caught.value)
    assert "rubric function 'judge" in str(caught.value)
    assert isinstance(caught.value, TypeError)
    assert calls == []


def test_rubric_defaults_count_as_given() -> None:
    @osmosis_rubric
    def judge(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 1.0

    assert judge("out", "ref") == 1.0


def test_free_form_rubric_and_any_reward_leave_argument_values_alone() -> None:
    @osmosis_rubric
    def judge(messages: Any, reference: Any) -> float:
        return 1.0

    @osmosis_reward
    def reward(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 1.0

    assert judge(1, 2) == 1.0
    assert reward(1, 2) == 1.0  # type: ignore[arg-type]  # 0.2 does not check reward arguments


# --- async detection and metadata ----------------------------------------------------------------


async def async_reward(
    solution_str: str, ground_truth: str, extra_info: dict | None = None, scale: float = 1.0
) -> float:
    """An async reward."""
    return 0.25 * scale


def sync_reward(
    solution_str: str, ground_truth: str, extra_info: dict | None = None, scale: float = 1.0
) -> float:
    """A sync reward."""
    return 0.25 * scale


class AsyncReward:
    """A callable object with ``async def __call__``."""

    async def __call__(self, solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 0.25


class SyncReward:
    def __call__(self, solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 0.25


# (function, whether the wrapper is async)
CALLABLES = [
    pytest.param(sync_reward, False, id="function"),
    pytest.param(async_reward, True, id="async-function"),
    pytest.param(AsyncReward(), True, id="async-object"),
    pytest.param(SyncReward(), False, id="object"),
    pytest.param(functools.partial(async_reward, scale=1.0), True, id="partial-of-async"),
    pytest.param(functools.partial(functools.partial(async_reward), scale=1.0), True, id="nested-partial"),
    pytest.param(functools.partial(AsyncReward()), True, id="partial-of-async-object"),
    pytest.param(functools.partial(sync_reward, scale=1.0), False, id="partial-of-sync"),
]


@pytest.mark.parametrize("decorator", BOTH)
@pytest.mark.parametrize(("func", "is_async"), CALLABLES)
def test_async_callables_get_an_async_wrapper(
    decorator: Callable[..., Any], func: Any, is_async: bool
) -> None:
    wrapper = decorator(func)
    assert inspect.iscoroutinefunction(wrapper) is is_async
    result = wrapper("out", "ref", None)
    assert inspect.isawaitable(result) is is_async
    assert run(result) == 0.25


@pytest.mark.parametrize("func", [sync_reward, async_reward], ids=["sync", "async"])
def test_wrapper_keeps_the_function_metadata(func: Callable[..., Any]) -> None:
    wrapper = osmosis_reward(func)
    assert wrapper.__wrapped__ is func
    assert inspect.signature(wrapper) == inspect.signature(func)
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
        assert getattr(wrapper, attribute) == getattr(func, attribute)


def test_0_2_import_paths_lead_to_the_same_decorators() -> None:
    assert osmosis_ai.utils.osmosis_reward is osmosis_ai.rewards.osmosis_reward is osmosis_ai.osmosis_reward
    assert osmosis_ai.utils.osmosis_rubric is osmosis_ai.rewards.osmosis_rubric is osmosis_ai.osmosis_rubric


# -- return values ---------------------------------------------------------------------------------
# Every case runs through four doors: a sync and an async function, decorated as reward and as rubric.


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
