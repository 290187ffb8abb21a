"""Which reward a runtime scores with, and how it is called: resolved once, before any worker starts.

A reward is named ``"module.path:attribute"`` (the attribute may be dotted: ``"module:Class.method"``)
or passed as the object itself. Worker processes import it by name and never receive a pickled
function, so closures, module-level partials and module state all work. An object passed to a
runtime with workers must therefore be reachable by name: found through its ``__qualname__``, or
among its module's attributes (a closure or partial bound at module level). A reward defined in the
script being run (``__main__``) is loaded in a worker by running that script as ``__mp_main__``, as
:mod:`multiprocessing` does: code under ``if __name__ == "__main__":`` does not run there.

Checked here, each with its own message: the name is well formed, the module imports (with the
working directory first on ``sys.path``, as on the command line), the attribute exists and is
callable, and its signature fits one of the two shapes of :mod:`osmosis_ai.rewards.eval_fn`,
accepting the three arguments by keyword (as eval functions are called) or else by position (as
trainer-side rewards are).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from osmosis_ai._usercode import UserCodeRaised, is_async_callable
from osmosis_ai.rewards.eval_fn import PARAMETERS, SHAPES, shape_of
from osmosis_ai.rewards.runtime.errors import RewardLoadError

MAIN_ALIAS = "__mp_main__"
RAW = "raw"
"""The mode of a target resolved without a shape: called with its arguments as given, its return
value sent back as it is (it must pickle), not made a score."""
_LISTED_ATTRIBUTES = 20


@dataclass(frozen=True)
class RewardTarget:
    """A resolved reward: the object, how workers import it and how it is called.

    ``module``/``attribute``/``main_file`` are ``None`` for an object that cannot be imported by name
    (allowed in-process only). ``keywords`` are the argument names to call it with, or ``None`` to
    call it positionally.
    """

    function: Callable[..., Any]
    name: str
    mode: str
    keywords: tuple[str, ...] | None
    is_async: bool
    module: str | None = None
    attribute: str | None = None
    main_file: str | None = None


def resolve(reward: str | Callable[..., Any], *, by_name: bool, shaped: bool = True) -> RewardTarget:
    """Resolve ``reward``; ``by_name`` demands that worker processes can import it by name. Without
    ``shaped`` it is any callable, called with the arguments given as they are (mode :data:`RAW`)."""
    if isinstance(reward, str):
        module, attribute = _parse(reward)
        function = import_reward(module, attribute, None, spec=reward)
        return _target(function, reward, module, attribute, None, shaped)
    if not callable(reward):
        raise RewardLoadError(
            f"a reward must be a callable or a 'module.path:attribute' string, got a {type(reward).__name__}"
        )
    found = _find_by_name(reward)
    if found is None:
        if by_name:
            raise RewardLoadError(
                f"reward {_describe(reward)} cannot be imported by name in a worker process: define it at "
                "module level, pass it as 'module.path:attribute', or score in-process with workers=0"
            )
        return _target(reward, _describe(reward), None, None, None, shaped)
    module, attribute, main_file = found
    if main_file is None and module == "__main__" and by_name:
        raise RewardLoadError(
            f"reward {_describe(reward)} is defined in an interactive session, which a worker process "
            "cannot import: put it in a module, or score in-process with workers=0"
        )
    return _target(reward, f"{module}:{attribute}", module, attribute, main_file, shaped)


def import_reward(module: str, attribute: str, main_file: str | None, *, spec: str) -> Any:
    """Import ``module`` (or run ``main_file`` as ``__mp_main__``) and return ``attribute`` of it.

    Used by the parent to check a name and by each worker to load the reward.
    """
    try:
        namespace = _load_main(main_file) if main_file is not None else _import(module)
    except (Exception, SystemExit) as exc:  # the user's module ran: whatever it raised is theirs to fix
        raise RewardLoadError(
            f"cannot import {module!r} for reward {spec!r}: {_import_problem(exc)}"
        ) from exc
    try:
        return lookup(namespace, attribute)
    except AttributeError:
        raise RewardLoadError(
            f"module {module!r} has no attribute {attribute!r}; {_public_attributes(namespace)}"
        ) from None


def lookup(namespace: Any, attribute: str) -> Any:
    """``namespace.a.b`` for ``attribute == "a.b"``."""
    value = namespace
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def _parse(spec: str) -> tuple[str, str]:
    module, sep, attribute = spec.rpartition(":")
    if not sep or not module or not attribute:
        raise RewardLoadError(
            f"invalid reward {spec!r}: expected 'module.path:attribute' (e.g. 'my_rewards:exact_match')"
        )
    return module, attribute


def _import(module: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(module)


def _load_main(path: str) -> Any:
    spec = importlib.util.spec_from_file_location(MAIN_ALIAS, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path!r} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MAIN_ALIAS] = module
    spec.loader.exec_module(module)
    return module


def _import_problem(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported"
    if isinstance(exc, ModuleNotFoundError):
        return f"{exc} (looked in the working directory {os.getcwd()} and sys.path)"
    return first_line(exc)


def first_line(exc: BaseException) -> str:
    """``Type: message`` on one line (``Type`` alone when there is no message); a contained
    ``SystemExit`` & co. reads as itself (``SystemExit: 3``)."""
    if isinstance(exc, UserCodeRaised):
        return str(exc).strip().splitlines()[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _public_attributes(namespace: Any) -> str:
    public = sorted(name for name in vars(namespace) if not name.startswith("_"))
    shown = ", ".join(public[:_LISTED_ATTRIBUTES]) + (", ..." if len(public) > _LISTED_ATTRIBUTES else "")
    return f"its public attributes are: {shown or '(none)'}"


def _describe(reward: Callable[..., Any]) -> str:
    name = getattr(reward, "__qualname__", None) or getattr(reward, "__name__", None)
    return repr(name) if isinstance(name, str) else f"of type {type(reward).__name__}"


def _find_by_name(reward: Callable[..., Any]) -> tuple[str, str, str | None] | None:
    """``(module, attribute, main_file)`` under which ``reward`` can be imported, or ``None``."""
    module_name = getattr(reward, "__module__", None)
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    if module is None or not isinstance(module_name, str):
        return None
    attribute = None
    qualname = getattr(reward, "__qualname__", None)
    if isinstance(qualname, str) and "<locals>" not in qualname:
        try:
            if lookup(module, qualname) is reward:
                attribute = qualname
        except AttributeError:
            pass
    if attribute is None:
        attribute = next((name for name, value in vars(module).items() if value is reward), None)
    if attribute is None:
        return None
    main_file = getattr(module, "__file__", None) if module_name == "__main__" else None
    return module_name, attribute, main_file


def _target(
    function: Any, name: str, module: str | None, attribute: str | None, main_file: str | None, shaped: bool
) -> RewardTarget:
    if not callable(function):
        raise RewardLoadError(f"reward {name!r} is a {type(function).__name__}, not a callable")
    if not shaped:
        return RewardTarget(
            function, name, RAW, None, is_async_callable(function), module, attribute, main_file
        )
    try:
        signature = inspect.signature(function)  # follows __wrapped__ through the reward decorators
    except (TypeError, ValueError) as exc:
        raise RewardLoadError(f"reward {name!r}: cannot read its signature: {exc}") from exc
    parameters = list(signature.parameters)
    mode = shape_of(parameters)
    if mode is None:
        raise RewardLoadError(
            f"reward {name!r} takes ({', '.join(parameters)}); its first parameter must be {SHAPES}"
        )
    names = PARAMETERS[mode]
    keywords: tuple[str, ...] | None = names
    try:
        signature.bind(**dict.fromkeys(names))
    except TypeError:
        keywords = None
        try:
            signature.bind(*names)
        except TypeError as exc:
            raise RewardLoadError(
                f"reward {name!r} takes ({', '.join(parameters)}), which cannot be called as "
                f"fn({', '.join(names)}): {exc}"
            ) from None
    return RewardTarget(
        function, name, mode, keywords, is_async_callable(function), module, attribute, main_file
    )
