"""What 0.2's ``osmosis_ai.rollout.eval`` paths keep beyond re-exports: loading ``module:function``
eval functions, and the required dataset columns in 0.2's order and as a set."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from osmosis_ai.rewards.eval_fn import EvalFnError, EvalFnWrapper

__all__ = ["REQUIRED_COLUMNS", "REQUIRED_COLUMNS_SET", "load_eval_fn", "load_eval_fns"]

# 0.2's order; the dataset reader matches the columns in any order and case.
REQUIRED_COLUMNS = ["ground_truth", "user_prompt", "system_prompt"]
REQUIRED_COLUMNS_SET = frozenset(REQUIRED_COLUMNS)


def load_eval_fn(module_path: str) -> Callable[..., Any]:
    """Import ``module.path:function`` (the working directory first on ``sys.path``), as ``--eval-fn`` does."""
    module_name, sep, attribute = module_path.rpartition(":")
    if not sep or not module_name or not attribute:
        raise EvalFnError(f"eval function {module_path!r} must look like 'module.path:function'")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed while importing: say which and why
        raise EvalFnError(f"cannot import {module_name!r} for eval function {module_path!r}: {exc}") from exc
    try:
        fn = getattr(module, attribute)
    except AttributeError:
        raise EvalFnError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(fn):
        raise EvalFnError(f"eval function {module_path!r} is a {type(fn).__name__}, not a callable")
    return fn


def load_eval_fns(module_paths: Iterable[str]) -> list[EvalFnWrapper]:
    """Load each spec, each named by its spec; a spec given twice is an error."""
    paths = list(module_paths)
    repeated = sorted({path for path in paths if paths.count(path) > 1})
    if repeated:
        raise EvalFnError(f"eval function(s) given more than once: {', '.join(repeated)}")
    return [EvalFnWrapper(load_eval_fn(path), path) for path in paths]
