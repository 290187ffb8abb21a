"""PEP 562 lazy exports, shared by every package that re-exports names from heavy modules.

A package lists ``{public name: module that defines it}`` once (``module:attribute`` where the
name differs there); its ``__all__`` and module-level ``__getattr__``/``__dir__`` are derived from
that table, so importing the package costs nothing until a name is first used. A missing optional
dependency surfaces as an ``ImportError`` that names the attribute and the extra to install,
instead of a bare ``ModuleNotFoundError`` from deep inside.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = (
    False  # keeps typing off the start-up path (see benchmarks/startup.py); checkers read it as True
)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import ModuleType
    from typing import Any

# Third-party modules whose absence means an optional extra is not installed.
_EXTRA_FOR_MODULE = {
    "fastapi": "server",
    "starlette": "server",
    "uvicorn": "server",
    "pyarrow": "server",
    "fastmcp": "mcp",
    "redis": "redis",
    "ray": "ray",
    "prometheus_client": "prometheus",
    "opentelemetry": "otel",
    "wandb": "wandb",
    "tensorboardX": "tensorboard",
    "mlflow": "mlflow",
    "agents": "openai-agents",
    "strands": "strands",
    "trl": "trl",
}


def install_hint(missing_module: str | None) -> str:
    """Return the pip line that brings ``missing_module`` in, as a sentence."""
    top = (missing_module or "").partition(".")[0]
    extra = _EXTRA_FOR_MODULE.get(top)
    if extra:
        return f"install it with: pip install 'osmosis-ai[{extra}]'"
    return "reinstall the package with: pip install --upgrade osmosis-ai"


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


def _submodule(package: str, name: str) -> ModuleType:
    """The module ``package.name``, imported if it exists; else the ``AttributeError`` of a missing name."""
    full = f"{package}.{name}"
    if full in sys.modules:  # imported, or being imported (a partly run module is not imported twice)
        return sys.modules[full]
    if name.startswith("__"):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    import importlib.util  # only here: the package's import stays this light

    if importlib.util.find_spec(full) is not None:
        return importlib.import_module(full)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build ``__getattr__`` and ``__dir__`` for ``package`` from its export table.

    Resolved values are cached in the package namespace, so each name is imported once. A name the
    table lacks that is a module under ``package`` is that module (osmosis-ai 0.2's paths included,
    which the import system finds through :mod:`osmosis_ai._aliases`).
    """

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            return _submodule(package, name)
        module_name, _, attribute = source.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
                raise ImportError(
                    f"{package}.{name} is not available: module {module_name!r} is missing from this installation"
                ) from exc
            raise ImportError(
                f"{package}.{name} needs the package {exc.name!r}, which is not installed; "
                f"{install_hint(exc.name)}"
            ) from exc
        value = getattr(module, attribute or name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
