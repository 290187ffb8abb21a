"""0.2's ``osmosis_ai._litellm_compat``: LiteLLM's exception classes and completion functions.

New code imports LiteLLM itself.

Names are resolved on first access (PEP 562), so importing this module does not import LiteLLM.
"""

from __future__ import annotations

from typing import Any

from osmosis_ai._litellm import import_litellm

_NAMES = (
    "APIConnectionError",
    "APIError",
    "AuthenticationError",
    "BudgetExceededError",
    "ContextWindowExceededError",
    "NotFoundError",
    "RateLimitError",
    "Timeout",
    "acompletion",
    "completion",
)

__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_litellm(), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMES))
