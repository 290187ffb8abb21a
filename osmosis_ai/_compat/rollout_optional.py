"""0.2's ``osmosis_ai.rollout._compat``: optional-dependency helpers that import nothing heavy up front.

The availability flags come from ``importlib.util.find_spec`` (no import); the module attributes
``pydantic_settings``, ``fastapi`` and ``uvicorn`` import the package on first access (``None`` when
it is not installed).
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from types import ModuleType

from osmosis_ai._lazy import require_optional as require_optional


def _available(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False


PYDANTIC_SETTINGS_AVAILABLE = _available("pydantic_settings")
FASTAPI_AVAILABLE = _available("fastapi")
UVICORN_AVAILABLE = _available("uvicorn")

_LAZY_MODULES = {"pydantic_settings", "fastapi", "uvicorn"}


def import_optional(module: str, package: str | None = None) -> tuple[ModuleType | None, bool]:
    """Import ``module`` (relative to ``package`` if given); ``(None, False)`` if it is not installed."""
    try:
        return importlib.import_module(module, package), True
    except ImportError:
        return None, False


def __getattr__(name: str) -> ModuleType | None:
    if name not in _LAZY_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _ = import_optional(name)
    globals()[name] = module
    return module
