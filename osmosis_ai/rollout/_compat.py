"""Optional-dependency helpers kept for compatibility, without importing anything heavy up front.

The availability flags come from ``importlib.util.find_spec`` (no import); the module attributes
``pydantic_settings``, ``fastapi`` and ``uvicorn`` import the package on first access (``None`` when
it is not installed).
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from types import ModuleType

from osmosis_ai._lazy import install_hint


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


def require_optional(
    module: str, package: str | None = None, feature_name: str = "", install_extra: str | None = None
) -> ModuleType:
    """Import ``module`` or raise ``ImportError`` saying which feature needs it and how to install it."""
    try:
        return importlib.import_module(module, package)
    except ImportError as exc:
        feature = f" for {feature_name}" if feature_name else ""
        hint = (
            f"install it with: pip install 'osmosis-ai[{install_extra}]'"
            if install_extra
            else install_hint(getattr(exc, "name", None) or module)
        )
        raise ImportError(f"The package {module!r} is required{feature}; {hint}") from exc


def __getattr__(name: str) -> ModuleType | None:
    if name not in _LAZY_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _ = import_optional(name)
    globals()[name] = module
    return module
