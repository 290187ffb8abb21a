"""Reward and rubric functions whose annotations are strings (``from __future__ import annotations``).

osmosis-ai 0.2 rejected every one of the accepted rewards here ("must be annotated as str, got str").
``Undefined`` below exists only for type checkers, so that a return annotation that cannot be
resolved is shown not to spoil the parameters that can.
"""

# ruff: noqa: UP006, UP035, UP045, RUF013 - the old-style and implicit-Optional annotations are under test

from __future__ import annotations

import builtins
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Dict, Optional

if TYPE_CHECKING:
    from decimal import Decimal as Undefined


class Label(str):
    """A str subclass: fine for a rubric, not for a reward (0.2 requires exactly ``str``)."""


# --- rewards accepted ---------------------------------------------------------------------------


def reward_plain(solution_str: str, ground_truth: str, extra_info: dict = None, **kwargs) -> float:
    return 1.0


def reward_pep604(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    return 1.0


def reward_optional(
    solution_str: str, ground_truth: builtins.str, extra_info: Optional[dict] = None
) -> float:
    return 1.0


def reward_unresolvable_return(
    solution_str: str, ground_truth: str, extra_info: dict | None = None
) -> Undefined:
    return 1.0


async def reward_async(
    solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> float:
    return 1.0


class RewardObject:
    async def __call__(self, solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 1.0


reward_partial = functools.partial(reward_async)

# --- rewards rejected: (function, parameter named in the message, found annotation) ---------------


def reward_optional_truth(
    solution_str: str, ground_truth: str | None, extra_info: dict | None = None
) -> float:
    return 1.0


def reward_label(solution_str: Label, ground_truth: str, extra_info: dict | None = None) -> float:
    return 1.0


def reward_typing_dict(solution_str: str, ground_truth: str, extra_info: Dict = None) -> float:
    return 1.0


def reward_generic_dict(
    solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None
) -> float:
    return 1.0


def reward_mapping(solution_str: str, ground_truth: str, extra_info: Mapping | None = None) -> float:
    return 1.0


def reward_unknown_name(solution_str: Text, ground_truth: str, extra_info: dict | None = None) -> float:  # noqa: F821
    return 1.0


# --- rubrics -------------------------------------------------------------------------------------


def rubric_plain(solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs: Any) -> float:
    return 1.0


def rubric_label(solution_str: Label, ground_truth: Optional[Label], extra_info: dict) -> float:
    return 1.0


async def rubric_async(solution_str: str, ground_truth: str, extra_info: dict) -> float:
    return 1.0


def rubric_int_truth(solution_str: str, ground_truth: int | None, extra_info: dict) -> float:
    return 1.0


def rubric_unknown_name(solution_str: Text, ground_truth: str, extra_info: dict) -> float:  # noqa: F821
    return 1.0
