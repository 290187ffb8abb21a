"""Decoration-time contract of ``@osmosis_reward`` and ``@osmosis_rubric``: which signatures pass.

Most cases are parameter lists compiled into ``def my_reward(...)``, each run four ways: ``def`` and
``async def``, with annotations evaluated and as strings (``from __future__ import annotations``).
The verdict and the message must be the same in all four.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from osmosis_ai import osmosis_reward, osmosis_rubric
from osmosis_ai.errors import OsmosisError, RewardContractError, RewardSignatureError
from tests.rewards import future_annotated as fa


class Label(str):
    """A str subclass: a rubric accepts it, a reward (exactly ``str`` in 0.2) does not."""


_NAMESPACE = {
    "Annotated": typing.Annotated,
    "Any": Any,
    "Dict": typing.Dict,  # noqa: UP006 - rejected as in 0.2
    "Label": Label,
    "Mapping": Mapping,
    "Optional": typing.Optional,
    "Union": typing.Union,
}  # no `builtins` here: "builtins.str" cannot be resolved and must count as str as written

REWARD_ACCEPTED = [
    "solution_str: str, ground_truth: str, extra_info: dict = None",
    "solution_str: str, ground_truth: str, extra_info: dict = None, **kwargs",
    "solution_str: str, ground_truth: str, extra_info: Optional[dict] = None",
    "solution_str: str, ground_truth: str, extra_info: Union[dict, None] = None",
    "solution_str: str, ground_truth: str, extra_info: dict | None = None",
    "solution_str: str, ground_truth: str, extra_info: dict = {}",  # any default, as in 0.2
    "solution_str: str, ground_truth: str = '', extra_info: dict = None",  # defaults of 1 and 2 not checked
    "solution_str: str, ground_truth: str = None, extra_info: dict = None",  # no implicit Optional (3.10)
    "solution_str: str, ground_truth: str, extra_info: dict = None, *, scale: float = 1.0",
    "solution_str: str, ground_truth: str, extra_info: dict = None, data_source: str = ''",
    "solution_str: str, ground_truth: str, /, extra_info: dict = None",
    "solution_str: 'str', ground_truth: 'builtins.str', extra_info: 'dict | None' = None",
    "solution_str: 'builtins.str', ground_truth: str, extra_info: 'Optional[dict]' = None",
]

FREE_FORM = [
    "",
    "messages, ground_truth, **kwargs",
    "x, y",
    "*args, **kwargs",
    "solution, ground_truth: int, extra_info: list",
    "messages: list, solution_str: int",
]

# (parameters, parameter named in the message, expected annotation, found annotation)
REWARD_REJECTED = [
    ("solution_str: str, ground_truth: str", "missing: 'extra_info'", "at least 3 parameters", "found 2"),
    (
        "solution_str: str",
        "missing: 'ground_truth', 'extra_info'",
        "at least 3 parameters",
        "found 1 (solution_str)",
    ),
    ("solution_str, ground_truth: str, extra_info: dict = None", "'solution_str'", "as str", "no annotation"),
    ("solution_str: Label, ground_truth: str, extra_info: dict = None", "'solution_str'", "as str", "Label"),
    (
        "solution_str: Optional[str], ground_truth: str, extra_info: dict = None",
        "'solution_str'",
        "as str",
        "Optional",
    ),
    (
        "solution_str: Annotated[str, 'x'], ground_truth: str, extra_info: dict = None",
        "'solution_str'",
        "as str",
        "Annotated",
    ),
    (
        "solution_str: 'Text', ground_truth: str, extra_info: dict = None",
        "'solution_str'",
        "as str",
        "could not be resolved",
    ),
    (
        "solution_str: str, gt: str, extra_info: dict = None",
        "parameter 2",
        "named 'ground_truth'",
        "found 'gt'",
    ),
    (
        "solution_str: str, ground_truth: Optional[str], extra_info: dict = None",
        "'ground_truth'",
        "as str",
        "Optional[str]",
    ),
    (
        "solution_str: str, ground_truth: str | None, extra_info: dict = None",
        "'ground_truth'",
        "as str",
        "str | None",
    ),
    (
        "solution_str: str, ground_truth: int, extra_info: dict = None",
        "'ground_truth'",
        "as str",
        "found int",
    ),
    (
        "solution_str: str, ground_truth: str, info: dict = None",
        "parameter 3",
        "named 'extra_info'",
        "found 'info'",
    ),
    (
        "solution_str: str, ground_truth: str, extra_info: Dict = None",
        "'extra_info'",
        "dict | None",
        "typing.Dict",
    ),
    (
        "solution_str: str, ground_truth: str, extra_info: dict[str, Any] = None",
        "'extra_info'",
        "dict | None",
        "dict[str, typing.Any]",
    ),
    (
        "solution_str: str, ground_truth: str, extra_info: Mapping = None",
        "'extra_info'",
        "dict | None",
        "Mapping",
    ),
    (
        "solution_str: str, ground_truth: str, extra_info: dict | list = None",
        "'extra_info'",
        "dict | None",
        "dict | list",
    ),
    (
        "solution_str: str, ground_truth: str, extra_info = None",
        "'extra_info'",
        "dict | None",
        "no annotation",
    ),
    (
        "solution_str: str, ground_truth: str, extra_info: dict",
        "'extra_info'",
        "must have a default",
        "found none",
    ),
    # several defects: the first in 0.2's order (name before annotation before default) is reported
    ("solution_str: str, gt: int, extra_info: dict", "parameter 2", "named 'ground_truth'", "found 'gt'"),
]

RUBRIC_ACCEPTED = [
    "solution_str: str, ground_truth: str, extra_info: dict",
    "solution_str: str, ground_truth: Optional[str], extra_info: dict, **kwargs",
    "solution_str: str, ground_truth: str | None, extra_info: dict",
    "solution_str: Label, ground_truth: Union[Label, None], extra_info: dict",
    "solution_str: 'str', ground_truth: 'str | None', extra_info: 'dict'",
    "solution_str: 'builtins.str', ground_truth: Optional['str'], extra_info: dict",
    "solution_str: str, ground_truth: str, extra_info",  # extra_info is not checked in 0.2
    "solution_str: str, ground_truth: str, extra_info: Mapping[str, Any] = None",
    "solution_str: str, ground_truth: str, extra_info: dict, data_source: str = ''",
]

RUBRIC_REJECTED = [
    ("solution_str: str, ground_truth: str", "missing: 'extra_info'", "at least 3 parameters", "found 2"),
    ("solution_str: int, ground_truth: str, extra_info: dict", "'solution_str'", "as str", "found int"),
    ("solution_str, ground_truth: str, extra_info: dict", "'solution_str'", "as str", "no annotation"),
    (
        "solution_str: 'Text', ground_truth: str, extra_info: dict",
        "'solution_str'",
        "as str",
        "could not be resolved",
    ),
    (
        "solution_str: str = '', ground_truth: str = '', extra_info: dict = None",
        "'solution_str'",
        "must not have a default",
        "''",
    ),
    (
        "solution_str: str, truth: str, extra_info: dict",
        "parameter 2",
        "named 'ground_truth'",
        "found 'truth'",
    ),
    (
        "solution_str: str, ground_truth: int, extra_info: dict",
        "'ground_truth'",
        "str or str | None",
        "found int",
    ),
    (
        "solution_str: str, ground_truth: Optional[int], extra_info: dict",
        "'ground_truth'",
        "str or str | None",
        "Optional[int]",
    ),
    (
        "solution_str: str, ground_truth: Union[str, int], extra_info: dict",
        "'ground_truth'",
        "str or str | None",
        "Union[str, int]",
    ),
    (
        "solution_str: str, ground_truth: str = None, extra_info: dict = None",
        "'ground_truth'",
        "must not have a default",
        "None",
    ),
    ("solution_str: str, ground_truth: str, info: dict", "parameter 3", "named 'extra_info'", "found 'info'"),
]

REWARD_SIGNATURE = (
    "def my_reward(solution_str: str, ground_truth: str, extra_info: dict = None, **kwargs) -> float"
)
RUBRIC_SIGNATURE = (
    "def my_reward(solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs) -> float"
)

VARIANTS = [
    pytest.param("def", False, id="sync"),
    pytest.param("async def", False, id="async"),
    pytest.param("def", True, id="sync-str-annotations"),
    pytest.param("async def", True, id="async-str-annotations"),
]


def compile_function(parameters: str, keyword: str, string_annotations: bool) -> Callable[..., Any]:
    """``my_reward(<parameters>)``, compiled on its own so the future import is exactly as asked."""
    future = "from __future__ import annotations\n" if string_annotations else ""
    source = f"{future}{keyword} my_reward({parameters}):\n    return 1.0\n"
    namespace = dict(_NAMESPACE)
    exec(compile(source, "<reward>", "exec", dont_inherit=True), namespace)
    return namespace["my_reward"]


@pytest.mark.parametrize(("keyword", "string_annotations"), VARIANTS)
@pytest.mark.parametrize("parameters", REWARD_ACCEPTED + FREE_FORM)
def test_reward_accepts(parameters: str, keyword: str, string_annotations: bool) -> None:
    func = compile_function(parameters, keyword, string_annotations)
    assert osmosis_reward(func).__wrapped__ is func


@pytest.mark.parametrize(("keyword", "string_annotations"), VARIANTS)
@pytest.mark.parametrize("parameters", RUBRIC_ACCEPTED + FREE_FORM)
def test_rubric_accepts(parameters: str, keyword: str, string_annotations: bool) -> None:
    func = compile_function(parameters, keyword, string_annotations)
    assert osmosis_rubric(func).__wrapped__ is func


@pytest.mark.parametrize(("keyword", "string_annotations"), VARIANTS)
@pytest.mark.parametrize(("parameters", "parameter", "expected", "found"), REWARD_REJECTED)
def test_reward_rejects(
    parameters: str, parameter: str, expected: str, found: str, keyword: str, string_annotations: bool
) -> None:
    func = compile_function(parameters, keyword, string_annotations)
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_reward(func)
    assert_names_everything(
        str(caught.value), "@osmosis_reward", parameter, expected, found, REWARD_SIGNATURE
    )
    assert caught.value.function_name == "my_reward"


@pytest.mark.parametrize(("keyword", "string_annotations"), VARIANTS)
@pytest.mark.parametrize(("parameters", "parameter", "expected", "found"), RUBRIC_REJECTED)
def test_rubric_rejects(
    parameters: str, parameter: str, expected: str, found: str, keyword: str, string_annotations: bool
) -> None:
    func = compile_function(parameters, keyword, string_annotations)
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_rubric(func)
    assert_names_everything(
        str(caught.value), "@osmosis_rubric", parameter, expected, found, RUBRIC_SIGNATURE
    )


def assert_names_everything(message: str, *fragments: str) -> None:
    missing = [fragment for fragment in fragments if fragment not in message]
    assert not missing, f"{missing} not in {message!r}"


def test_signature_error_is_the_builtin_0_2_raised() -> None:
    func = compile_function("solution_str: int, ground_truth: str, extra_info: dict = None", "def", False)
    with pytest.raises(TypeError):
        osmosis_reward(func)
    assert issubclass(RewardSignatureError, RewardContractError)
    assert issubclass(RewardSignatureError, OsmosisError)


def test_message_reads_whole() -> None:
    func = compile_function(
        "solution_str: str, ground_truth: str | None, extra_info: dict = None", "def", True
    )
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_reward(func)
    assert str(caught.value) == (
        "@osmosis_reward: parameter 'ground_truth' of my_reward must be annotated as str, found str | None.\n"
        f"Accepted signature: {REWARD_SIGNATURE}"
    )


def test_string_annotation_is_never_shown_as_its_target() -> None:
    """0.2 said "must be annotated as str, got str" for ``'str'``; an unresolved string is quoted."""
    func = compile_function("solution_str: 'Text', ground_truth: str, extra_info: dict = None", "def", False)
    with pytest.raises(
        RewardSignatureError, match=r"found 'Text' \(a string annotation that could not be resolved\)"
    ):
        osmosis_reward(func)


# --- module-level functions under `from __future__ import annotations`, objects and partials ------


@pytest.mark.parametrize(
    ("decorator", "func"),
    [
        (osmosis_reward, fa.reward_plain),
        (osmosis_reward, fa.reward_pep604),
        (osmosis_reward, fa.reward_optional),
        (osmosis_reward, fa.reward_unresolvable_return),
        (osmosis_reward, fa.reward_async),
        (osmosis_reward, fa.RewardObject()),
        (osmosis_reward, fa.reward_partial),
        (osmosis_reward, functools.partial(fa.reward_plain, scale=2)),
        (osmosis_rubric, fa.rubric_plain),
        (osmosis_rubric, fa.rubric_label),
        (osmosis_rubric, fa.rubric_async),
        (osmosis_rubric, functools.partial(fa.rubric_async)),
    ],
    ids=lambda value: getattr(value, "__name__", None) or type(value).__name__,
)
def test_future_annotated_module_accepted(decorator: Callable[..., Any], func: Callable[..., Any]) -> None:
    assert decorator(func).__wrapped__ is func


@pytest.mark.parametrize(
    ("decorator", "func", "parameter", "found"),
    [
        (osmosis_reward, fa.reward_optional_truth, "ground_truth", "str | None"),
        (osmosis_reward, fa.reward_label, "solution_str", "future_annotated.Label"),
        (osmosis_reward, fa.reward_typing_dict, "extra_info", "typing.Dict"),
        (osmosis_reward, fa.reward_generic_dict, "extra_info", "dict[str, typing.Any] | None"),
        (osmosis_reward, fa.reward_mapping, "extra_info", "collections.abc.Mapping | None"),
        (osmosis_reward, fa.reward_unknown_name, "solution_str", "'Text' (a string annotation"),
        (osmosis_rubric, fa.rubric_int_truth, "ground_truth", "int | None"),
        (osmosis_rubric, fa.rubric_unknown_name, "solution_str", "'Text' (a string annotation"),
    ],
    ids=lambda value: getattr(value, "__name__", None) if callable(value) else None,
)
def test_future_annotated_module_rejected(
    decorator: Callable[..., Any], func: Callable[..., Any], parameter: str, found: str
) -> None:
    with pytest.raises(RewardSignatureError) as caught:
        decorator(func)
    assert_names_everything(str(caught.value), f"parameter {parameter!r} of {func.__name__}", found)
    assert f"Accepted signature: def {func.__name__}(solution_str: str" in str(caught.value)


class BadRewardObject:
    async def __call__(self, solution_str: str, ground_truth: int, extra_info: dict | None = None) -> float:
        return 1.0


def bad_reward(solution_str: str, ground_truth: int, extra_info: dict | None = None) -> float:
    return 1.0


@pytest.mark.parametrize(
    ("func", "name"),
    [
        (BadRewardObject(), "BadRewardObject"),
        (functools.partial(bad_reward), "bad_reward"),
        (functools.partial(BadRewardObject()), "BadRewardObject"),
    ],
)
def test_objects_and_partials_are_checked_too(func: Callable[..., Any], name: str) -> None:
    with pytest.raises(
        RewardSignatureError, match=f"parameter 'ground_truth' of {name} must be annotated as str"
    ):
        osmosis_reward(func)


def test_not_a_function() -> None:
    with pytest.raises(RewardSignatureError, match="readable signature"):
        osmosis_reward(42)  # type: ignore[type-var]
