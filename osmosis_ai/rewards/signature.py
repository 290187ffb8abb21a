"""Decoration-time half of the reward decorators: read a function's shape and check its signature.

A function whose first parameter is named ``solution_str`` is *classic*: its first three parameters
must follow the decorator's :class:`Contract` (names, annotations, defaults), checked once when the
decorator runs. Any other signature is *free-form* and is accepted as it is.

Annotations are resolved one parameter at a time with ``typing.get_type_hints`` against the
function's globals, so string annotations (``from __future__ import annotations``, quoted
``"str"``, forward references) work, and an unrelated annotation that cannot be resolved (say a
return type imported only under ``TYPE_CHECKING``) does not spoil the others. An annotation that
cannot be resolved is judged as written, where ``"str"`` and ``"builtins.str"`` still count as
``str``.

This module imports ``inspect`` and ``typing``, which cost milliseconds; it is therefore loaded
when the first function is decorated, not by ``from osmosis_ai import osmosis_reward``.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from osmosis_ai._usercode import is_async_callable
from osmosis_ai.errors import RewardSignatureError

_STR_NAMES = ("str", "builtins.str")


class Contract:
    """What one decorator demands of a classic function.

    ``rules`` covers the first three parameters in order; ``accepted`` is the signature shown in
    error messages (``{name}`` is replaced by the user's function name); ``checks_arguments`` asks
    for call-time validation of the argument values.
    """

    __slots__ = ("accepted", "checks_arguments", "decorator", "rules")

    def __init__(
        self, decorator: str, rules: tuple[ParameterRule, ...], accepted: str, *, checks_arguments: bool
    ) -> None:
        self.decorator = decorator
        self.rules = rules
        self.accepted = accepted
        self.checks_arguments = checks_arguments


class ParameterRule:
    """The name, annotation and default one classic parameter must have.

    ``annotation`` is a predicate over the resolved annotation (``None``: anything goes) and
    ``expected`` describes it for error messages. ``default`` is ``"required"``, ``"forbidden"`` or
    ``"any"``.
    """

    __slots__ = ("annotation", "default", "expected", "name")

    def __init__(
        self, name: str, annotation: Callable[[Any], bool] | None, expected: str, default: str
    ) -> None:
        self.name = name
        self.annotation = annotation
        self.expected = expected
        self.default = default


class FunctionShape:
    """What the wrappers need to know about a decorated function, computed once."""

    __slots__ = ("classic", "is_async", "name", "signature", "strips_data_source")

    def __init__(
        self, name: str, signature: inspect.Signature, classic: bool, strips_data_source: bool, is_async: bool
    ) -> None:
        self.name = name
        self.signature = signature
        self.classic = classic
        self.strips_data_source = strips_data_source
        self.is_async = is_async


def read_shape(func: Callable[..., Any], contract: Contract) -> FunctionShape:
    """Inspect ``func`` once, and check it against ``contract`` if it is a classic function.

    Raises :class:`~osmosis_ai.errors.RewardSignatureError` (a ``TypeError``) on a contract breach.
    """
    name = function_name(func)
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise RewardSignatureError(
            f"{contract.decorator} needs a function with a readable signature; {func!r} has none ({exc})",
            function_name=name,
        ) from exc
    params = list(signature.parameters.values())
    classic = bool(params) and params[0].name == "solution_str"
    if classic:
        _check_classic(func, name, params, contract)
    strips = not any(p.name == "data_source" or p.kind is p.VAR_KEYWORD for p in params)
    return FunctionShape(name, signature, classic, strips, is_async_callable(func))


def function_name(func: Callable[..., Any]) -> str:
    """The name to show for ``func``: its ``__name__``, or its class name for a callable object."""
    target = _strip_partials(func)
    name = getattr(target, "__name__", None)
    return name if isinstance(name, str) else type(target).__name__


def _class_call(obj: Any) -> Any:
    """The ``__call__`` defined by the class of ``obj`` (a callable object's method), or ``None``."""
    return getattr(type(obj), "__call__", None)  # noqa: B004 - reading the method, not testing callability


def _strip_partials(func: Any) -> Any:
    while isinstance(func, functools.partial):
        func = func.func
    return func


def _check_classic(
    func: Callable[..., Any], name: str, params: list[inspect.Parameter], contract: Contract
) -> None:
    """Apply ``contract.rules`` to the first parameters: count, then per parameter name, annotation,
    default. The first breach is reported, so the order decides which message a user sees."""
    accepted = contract.accepted.format(name=name)
    if len(params) < len(contract.rules):
        missing = ", ".join(repr(rule.name) for rule in contract.rules[len(params) :])
        expected = ", ".join(rule.name for rule in contract.rules)
        found = ", ".join(p.name for p in params)
        _fail(
            contract,
            name,
            f"{name} must take at least {len(contract.rules)} parameters ({expected}), found "
            f"{len(params)} ({found}); missing: {missing}",
            accepted,
        )
    namespace = _globals_of(func)
    for position, (rule, param) in enumerate(zip(contract.rules, params, strict=False), start=1):
        if param.name != rule.name:
            _fail(
                contract,
                name,
                f"parameter {position} of {name} must be named {rule.name!r}, found {param.name!r}",
                accepted,
            )
        if rule.annotation is not None:
            resolved = _resolve(param.annotation, namespace)
            if not rule.annotation(resolved):
                _fail(
                    contract,
                    name,
                    f"parameter {rule.name!r} of {name} must be annotated as {rule.expected}, "
                    f"found {_describe(param.annotation, resolved)}",
                    accepted,
                )
        _check_default(contract, name, rule, param, accepted)


def _check_default(
    contract: Contract, name: str, rule: ParameterRule, param: inspect.Parameter, accepted: str
) -> None:
    has_default = param.default is not param.empty
    if rule.default == "required" and not has_default:
        _fail(
            contract,
            name,
            f"parameter {rule.name!r} of {name} must have a default value "
            f"({rule.name}: {rule.expected} = None), found none",
            accepted,
        )
    if rule.default == "forbidden" and has_default:
        _fail(
            contract,
            name,
            f"parameter {rule.name!r} of {name} must not have a default value, found default {param.default!r}",
            accepted,
        )


def _fail(contract: Contract, name: str, problem: str, accepted: str) -> None:
    raise RewardSignatureError(
        f"{contract.decorator}: {problem}.\nAccepted signature: {accepted}", function_name=name
    )


def _globals_of(func: Any) -> dict[str, Any]:
    """The module namespace string annotations of ``func`` refer to, through decorators
    (``__wrapped__``), partials, bound methods and callable objects."""
    target = _strip_partials(inspect.unwrap(func))
    namespace = getattr(target, "__globals__", None)
    if namespace is None:
        namespace = getattr(_class_call(target), "__globals__", None)
    return namespace if isinstance(namespace, dict) else {}


def _resolve(annotation: Any, namespace: dict[str, Any]) -> Any:
    """``annotation`` evaluated like ``typing.get_type_hints`` would, or as written if that fails.

    Each annotation is resolved on its own (through a stand-in object holding just that one) so a
    broken annotation elsewhere in the signature does not matter, and so that Python 3.10 does not
    turn ``x: str = None`` into ``Optional[str]`` (which would make the same function pass or fail
    depending on the Python version).
    """
    if annotation is inspect.Parameter.empty:
        return annotation
    holder = types.SimpleNamespace(__annotations__={"annotation": annotation})
    try:
        return typing.get_type_hints(holder, globalns=namespace, include_extras=True)["annotation"]
    except Exception:  # unresolvable forward reference, syntax error in a string, ...: judge as written
        return annotation


def _describe(raw: Any, resolved: Any) -> str:
    """Render an annotation for an error message, so that ``'str'`` never reads like ``str``."""
    if raw is inspect.Parameter.empty:
        return "no annotation"
    if isinstance(resolved, str):
        return f"{resolved!r} (a string annotation that could not be resolved)"
    if isinstance(resolved, type) and not _is_generic_alias(resolved):
        module = resolved.__module__
        return resolved.__qualname__ if module == "builtins" else f"{module}.{resolved.__qualname__}"
    return repr(resolved)


def _is_generic_alias(annotation: Any) -> bool:
    return typing.get_origin(annotation) is not None


def _non_none_members(annotation: Any) -> tuple[Any, ...] | None:
    """The members of a ``Union``/``X | Y`` other than ``None``, or ``None`` if it is no union."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    return tuple(arg for arg in typing.get_args(annotation) if arg is not type(None))


def _is_exact_str(annotation: Any) -> bool:
    """``str`` itself, or an unresolved ``"str"``/``"builtins.str"``, also quoted twice (``x: "str"``
    under ``from __future__ import annotations``) or left as a forward reference inside a union."""
    if annotation is str:
        return True
    text = annotation if isinstance(annotation, str) else _forward_ref_name(annotation)
    return text is not None and text.strip("'\"") in _STR_NAMES


def _is_str_like(annotation: Any) -> bool:
    return _is_exact_str(annotation) or (
        isinstance(annotation, type) and not _is_generic_alias(annotation) and issubclass(annotation, str)
    )


def _is_optional_str_like(annotation: Any) -> bool:
    members = _non_none_members(annotation)
    if members is None:
        return _is_str_like(annotation)
    return len(members) == 1 and _is_str_like(members[0])


def _is_optional_dict(annotation: Any) -> bool:
    """``dict``, ``Optional[dict]`` or ``dict | None``; ``typing.Dict``, ``dict[str, Any]`` and
    ``Mapping`` are rejected, so a function accepted here is accepted by every release."""
    members = _non_none_members(annotation)
    return annotation is dict if members is None else members == (dict,)


def _forward_ref_name(annotation: Any) -> str | None:
    """The text of a ``typing.ForwardRef`` left unresolved inside a union, else ``None``."""
    text = getattr(annotation, "__forward_arg__", None)
    return text if isinstance(text, str) else None


REWARD = Contract(
    "@osmosis_reward",
    (
        ParameterRule("solution_str", _is_exact_str, "str", "any"),
        ParameterRule("ground_truth", _is_exact_str, "str", "any"),
        ParameterRule("extra_info", _is_optional_dict, "dict | None", "required"),
    ),
    "def {name}(solution_str: str, ground_truth: str, extra_info: dict = None, **kwargs) -> float",
    checks_arguments=False,
)

RUBRIC = Contract(
    "@osmosis_rubric",
    (
        ParameterRule("solution_str", _is_str_like, "str", "forbidden"),
        ParameterRule("ground_truth", _is_optional_str_like, "str or str | None", "forbidden"),
        ParameterRule("extra_info", None, "dict", "any"),
    ),
    "def {name}(solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs) -> float",
    checks_arguments=True,
)
