"""0.2 import path of eval functions: :class:`EvalFnWrapper` and loading ``module:function`` specs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from osmosis_ai.evaluation.errors import EvalFnError
from osmosis_ai.evaluation.eval_fn import EvalFnWrapper

__all__ = ["EvalFnError", "EvalFnWrapper", "load_eval_fn", "load_eval_fns"]


def load_eval_fn(module_path: str) -> Callable[..., Any]:
    """Import ``module.path:function`` (the working directory first on ``sys.path``), as ``--eval-fn`` does."""
    from osmosis_ai.cli.errors import CLIError
    from osmosis_ai.cli.loading import load_attribute

    try:
        fn = load_attribute(module_path, what="eval function", example="e.g. 'my_evals:exact'")
    except CLIError as exc:
        raise EvalFnError(str(exc)) from exc
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
